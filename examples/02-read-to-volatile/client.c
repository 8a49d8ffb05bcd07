/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 02-read-to-volatile/client.c -- reads the server's buffer into local (volatile) memory and
 * prints it
 *
 * usage: client ADDR PORT
 */
#include <string.h>

#include "common.h"

#define SIZE 4096
#define TEXT "The quick brown fox jumps over the lazy dog."

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];

    struct rpma_peer *peer = ex_peer_new(addr, false);
    char *dst = ex_malloc(SIZE);
    struct rpma_mr_local *dst_mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, dst, SIZE, RPMA_MR_USAGE_READ_DST, &dst_mr));

    struct rpma_conn *conn = ex_connect(peer, addr, port, NULL, NULL, 0);
    struct rpma_mr_remote *src_mr = ex_remote_mr_from_pdata(conn, 0);
    size_t src_size = 0;
    EX_CHECK(rpma_mr_remote_get_size(src_mr, &src_size));
    printf("connected; the server exposes %zu bytes\n", src_size);
    if (src_size > SIZE) src_size = SIZE;

    /* the read completes on the connection's CQ; op_context comes back as wr_id */
    struct rpma_cq *cq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));
    EX_CHECK(rpma_read(conn, dst_mr, 0, src_mr, 0, src_size, RPMA_F_COMPLETION_ALWAYS, dst));
    ex_cq_expect(cq, IBV_WC_RDMA_READ, dst, NULL);
    dst[SIZE - 1] = '\0';
    printf("read %zu bytes: \"%s\"\n", src_size, dst);
    if (strcmp(dst, TEXT) != 0) EX_FAIL("expected \"%s\"", TEXT);

    EX_CHECK(rpma_mr_remote_delete(&src_mr));
    ex_disconnect(&conn);
    EX_CHECK(rpma_mr_dereg(&dst_mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(dst);
    return 0;
}
