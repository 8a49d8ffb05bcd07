/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bulk.c -- 64 MiB written in odd-sized chunks with several writes in flight, flushed, read back
 * the same way; the read-back equals the source (checksum and bytes) and the server's memory holds
 * exactly the pattern.
 */
#define _GNU_SOURCE
#include <string.h>

#include "common.h"

#define SIZE (64UL * 1024 * 1024)
#define CHUNK (1024UL * 1024 - 4096 + 123) /* odd on purpose: the last chunk is shorter */
#define WINDOW 8
#define SEED 0xb01c

static void server(const struct it_args *a) {
    char *buf = it_alloc(SIZE);
    struct it_region_server srv;
    it_region_server_open(
        &srv, a, buf, SIZE,
        RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
    struct rpma_conn *conn = it_region_server_accept(&srv);
    it_disconnect_passive(&conn, false);

    long bad = it_verify(buf, SIZE, SEED);
    if (bad >= 0) IT_FAIL("server memory differs at byte %ld", bad);
    printf("server checksum %016llx\n", (unsigned long long)it_checksum(buf, SIZE));
    it_region_server_close(&srv);
    free(buf);
}

/* moves the whole range in CHUNK pieces, WINDOW of them in flight, completions in order */
static void transfer(struct rpma_conn *conn, struct rpma_cq *cq, bool write,
                     struct rpma_mr_local *local, struct rpma_mr_remote *remote) {
    size_t chunks = (SIZE + CHUNK - 1) / CHUNK;
    size_t posted = 0, done = 0;
    while (done < chunks) {
        while (posted < chunks && posted - done < WINDOW) {
            size_t off = posted * CHUNK;
            size_t len = SIZE - off < CHUNK ? SIZE - off : CHUNK;
            void *ctx = (void *)(uintptr_t)(0x10000 + posted);
            if (write)
                CHECK_OK(
                    rpma_write(conn, remote, off, local, off, len, RPMA_F_COMPLETION_ALWAYS, ctx));
            else
                CHECK_OK(
                    rpma_read(conn, local, off, remote, off, len, RPMA_F_COMPLETION_ALWAYS, ctx));
            posted++;
        }
        it_cq_expect(cq, write ? IBV_WC_RDMA_WRITE : IBV_WC_RDMA_READ,
                     (void *)(uintptr_t)(0x10000 + done));
        done++;
    }
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *src = it_alloc(SIZE), *dst = it_alloc(SIZE);
    it_fill(src, SIZE, SEED);
    struct rpma_mr_local *smr = NULL, *dmr = NULL;
    CHECK_OK(rpma_mr_reg(peer, src, SIZE, RPMA_MR_USAGE_WRITE_SRC, &smr));
    CHECK_OK(rpma_mr_reg(peer, dst, SIZE, RPMA_MR_USAGE_READ_DST, &dmr));
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, 16));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, 16));
    struct rpma_mr_remote *remote = NULL;
    struct rpma_cq *cq = NULL;
    struct rpma_conn *conn = it_connect_region(peer, a, cfg, NULL, 0, &remote, &cq);
    size_t rsize = 0;
    CHECK_OK(rpma_mr_remote_get_size(remote, &rsize));
    CHECK_EQ(rsize, SIZE);

    long long t0 = it_now_ms();
    transfer(conn, cq, true, smr, remote);
    CHECK_OK(rpma_flush(conn, remote, 0, SIZE, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS,
                        (void *)0xf1));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0xf1);
    long long t1 = it_now_ms();
    transfer(conn, cq, false, dmr, remote);
    long long t2 = it_now_ms();
    it_cq_expect_empty(cq);

    uint64_t cs = it_checksum(src, SIZE), cd = it_checksum(dst, SIZE);
    printf("write+flush %lld ms, read %lld ms, checksums %016llx %016llx\n", t1 - t0, t2 - t1,
           (unsigned long long)cs, (unsigned long long)cd);
    CHECK(cs == cd);
    CHECK(memcmp(src, dst, SIZE) == 0);

    it_disconnect_region(&conn, &remote);
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_mr_dereg(&dmr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(src);
    free(dst);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
