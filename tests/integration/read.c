/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * read.c -- the client reads the server's registered buffer into its own (rpma_read) and
 * checks every byte and every completion (opcode, wr_id, status, flags).
 */
#define _GNU_SOURCE
#include <string.h>

#include "common.h"

#define SIZE (64 * 1024)
#define SEED 0x7ead
#define BATCH 8

static void server(const struct it_args *a) {
    char *buf = it_alloc(SIZE);
    it_fill(buf, SIZE, SEED);
    struct it_region_server srv;
    it_region_server_open(&srv, a, buf, SIZE, RPMA_MR_USAGE_READ_SRC);
    struct rpma_conn *conn = it_region_server_accept(&srv);
    it_disconnect_passive(&conn, false);

    /* remote reads leave the source untouched */
    CHECK_EQ(it_verify(buf, SIZE, SEED), -1);
    it_region_server_close(&srv);
    free(buf);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *dst = it_alloc(SIZE);
    char *expect = it_alloc(SIZE);
    it_fill(expect, SIZE, SEED);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, dst, SIZE, RPMA_MR_USAGE_READ_DST, &mr));

    struct rpma_mr_remote *src = NULL;
    struct rpma_cq *cq = NULL;
    struct rpma_conn *conn = it_connect_region(peer, a, NULL, NULL, 0, &src, &cq);
    size_t rsize = 0;
    CHECK_OK(rpma_mr_remote_get_size(src, &rsize));
    CHECK_EQ(rsize, SIZE);

    /* the whole buffer */
    CHECK_OK(rpma_read(conn, mr, 0, src, 0, SIZE, RPMA_F_COMPLETION_ALWAYS, (void *)0x1001));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x1001);
    CHECK(memcmp(dst, expect, SIZE) == 0);

    /* a slice to a different offset: only the slice changes */
    memset(dst, 0, SIZE);
    CHECK_OK(rpma_read(conn, mr, 50, src, 1000, 300, RPMA_F_COMPLETION_ALWAYS, (void *)0x1002));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x1002);
    CHECK(memcmp(dst + 50, expect + 1000, 300) == 0);
    for (size_t i = 0; i < SIZE; i++)
        if ((i < 50 || i >= 350) && dst[i] != 0)
            IT_FAIL("byte %zu outside the read range changed", i);

    /* a successful ON_ERROR read gives no completion; the next ALWAYS read does */
    memset(dst, 0, SIZE);
    CHECK_OK(rpma_read(conn, mr, 0, src, 0, 64, RPMA_F_COMPLETION_ON_ERROR, (void *)0x1003));
    CHECK_OK(rpma_read(conn, mr, 64, src, 64, 64, RPMA_F_COMPLETION_ALWAYS, (void *)0x1004));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x1004);
    it_cq_expect_empty(cq);
    CHECK(memcmp(dst, expect, 128) == 0);

    /* the bit ALWAYS adds to ON_ERROR asks for the completion on success, alone too (upstream
     * signals on that bit); bits no flag names ask for nothing more */
    CHECK_OK(rpma_read(conn, mr, 128, src, 128, 64,
                       RPMA_F_COMPLETION_ALWAYS & ~RPMA_F_COMPLETION_ON_ERROR, (void *)0x1005));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x1005);
    CHECK_OK(rpma_read(conn, mr, 192, src, 192, 64, RPMA_F_COMPLETION_ON_ERROR | (1 << 4),
                       (void *)0x1006));
    CHECK_OK(rpma_read(conn, mr, 256, src, 256, 64, RPMA_F_COMPLETION_ALWAYS, (void *)0x1007));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x1007);
    it_cq_expect_empty(cq);
    CHECK(memcmp(dst, expect, 320) == 0);

    /* several reads in flight: each completes once, in posting order */
    memset(dst, 0, SIZE);
    for (uintptr_t i = 0; i < BATCH; i++) {
        size_t off = i * (SIZE / BATCH);
        CHECK_OK(rpma_read(conn, mr, off, src, off, SIZE / BATCH, RPMA_F_COMPLETION_ALWAYS,
                           (void *)(0x2000 + i)));
    }
    for (uintptr_t i = 0; i < BATCH; i++) it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)(0x2000 + i));
    CHECK(memcmp(dst, expect, SIZE) == 0);
    it_cq_expect_empty(cq);

    it_disconnect_region(&conn, &src);
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(dst);
    free(expect);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
