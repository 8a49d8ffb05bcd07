/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 03-read-to-persistent/client.c -- reads the server's text into persistent memory: a file
 * mapped with MAP_SHARED (or plain DRAM when no file is given), then makes it durable
 *
 * usage: client ADDR PORT [FILE]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define SIZE 4096

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT [FILE]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    const char *path = argc > 3 ? argv[3] : NULL;

    struct ex_mem mem;
    ex_mem_map(path, SIZE, &mem);
    char *dst = mem.ptr;
    if (path) {
        ex_mem_print_earlier(&mem, path);
    } else {
        printf("no file given: reading into DRAM\n");
    }

    struct rpma_peer *peer = ex_peer_new(addr, false);
    struct rpma_mr_local *dst_mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, dst, SIZE, RPMA_MR_USAGE_READ_DST, &dst_mr));
    struct rpma_conn *conn = ex_connect(peer, addr, port, NULL, NULL, 0);
    struct rpma_mr_remote *src_mr = ex_remote_mr_from_pdata(conn, 0);
    size_t len = 0;
    EX_CHECK(rpma_mr_remote_get_size(src_mr, &len));
    if (len > SIZE) len = SIZE;

    struct rpma_cq *cq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));
    memset(dst, 0, SIZE);
    EX_CHECK(rpma_read(conn, dst_mr, 0, src_mr, 0, len, RPMA_F_COMPLETION_ALWAYS, NULL));
    ex_cq_expect(cq, IBV_WC_RDMA_READ, NULL, NULL);
    dst[SIZE - 1] = '\0';
    if (dst[0] == '\0') EX_FAIL("the read brought an empty text");

    /* the read only placed the data; durability is up to this side */
    ex_mem_persist(&mem, 0, len);
    printf("read and persisted \"%s\"\n", dst);

    if (path) {
        /* what the file itself holds now */
        char check[SIZE];
        ssize_t n = pread(mem.fd, check, SIZE, 0);
        if (n != SIZE) EX_FAIL("pread(%s): %s", path, n < 0 ? strerror(errno) : "short read");
        if (memcmp(check, dst, SIZE) != 0) EX_FAIL("%s differs from the mapping", path);
        printf("%s now holds the same text\n", path);
    }

    EX_CHECK(rpma_mr_remote_delete(&src_mr));
    ex_disconnect(&conn);
    EX_CHECK(rpma_mr_dereg(&dst_mr));
    EX_CHECK(rpma_peer_delete(&peer));
    ex_mem_unmap(&mem);
    return 0;
}
