/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 11-write-with-imm/client.c -- writes a text into the server's memory with immediate data (the
 * text's length), which tells the server that the write has landed
 *
 * usage: client ADDR PORT [TEXT]
 */
#include <string.h>

#include "common.h"

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT [TEXT]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    const char *text = argc > 3 ? argv[3] : "Written with immediate data.";
    size_t len = strlen(text);
    if (len == 0) EX_FAIL("the text must not be empty");

    struct rpma_peer *peer = ex_peer_new(addr, false);
    char *src = ex_malloc(len + 1);
    memcpy(src, text, len);
    struct rpma_mr_local *src_mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, src, len, RPMA_MR_USAGE_WRITE_SRC, &src_mr));
    struct rpma_conn *conn = ex_connect(peer, addr, port, NULL, NULL, 0);
    struct rpma_mr_remote *dst_mr = ex_remote_mr_from_pdata(conn, 0);
    size_t dst_size = 0;
    EX_CHECK(rpma_mr_remote_get_size(dst_mr, &dst_size));
    if (len > dst_size) EX_FAIL("the text does not fit the server's %zu bytes", dst_size);
    struct rpma_cq *cq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));

    EX_CHECK(rpma_write_with_imm(conn, dst_mr, 0, src_mr, 0, len, RPMA_F_COMPLETION_ALWAYS,
                                 (uint32_t)len, NULL));
    ex_cq_expect(cq, IBV_WC_RDMA_WRITE, NULL, NULL);
    printf("wrote \"%s\" with immediate data %zu\n", text, len);

    EX_CHECK(rpma_mr_remote_delete(&dst_mr));
    ex_disconnect(&conn);
    EX_CHECK(rpma_mr_dereg(&src_mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(src);
    return 0;
}
