/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * atomic.c -- rpma_atomic_write of two alternating 8-byte patterns on one connection while a
 * second thread reads the same 8 bytes over a second connection: every value read must be one of
 * the patterns, never a mix. Misaligned offsets give RPMA_E_INVAL; completions have opcode
 * IBV_WC_RDMA_WRITE.
 *
 * Never torn is rpma's guarantee (one aligned store). The reference emulates the atomic write with
 * an ordinary RDMA write where the device lacks the native verb, and rxe copies it in pieces: a
 * concurrent read may see a mix (docs/testing.md), so against the reference torn reads are counted,
 * not failed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common.h"

#define SIZE 4096
#define OFF 64 /* the target word */
#define GUARD 0xab
#define WRITES 3000
#define WBATCH 5
#define RBATCH 4
#define MIN_READS 50
/* every byte differs between the two, so any torn value is caught */
#define P0 0x0123456789abcdefULL
#define P1 0xfedcba9876543210ULL

static void server(const struct it_args *a) {
    unsigned char *buf = it_alloc(SIZE);
    memset(buf, GUARD, SIZE);
    uint64_t p0 = P0;
    memcpy(buf + OFF, &p0, 8);
    struct it_region_server srv;
    it_region_server_open(&srv, a, buf, SIZE, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC);
    struct rpma_conn *c1 = it_region_server_accept(&srv);
    struct rpma_conn *c2 = it_region_server_accept(&srv);
    it_disconnect_passive(&c1, false);
    it_disconnect_passive(&c2, false);

    /* the last pattern written: the last write has index WRITES - 1 */
    uint64_t v;
    memcpy(&v, buf + OFF, 8);
    CHECK(v == ((WRITES - 1) % 2 ? P0 : P1));
    for (size_t i = 0; i < SIZE; i++)
        if ((i < OFF || i >= OFF + 8) && buf[i] != GUARD)
            IT_FAIL("byte %zu next to the atomic target changed", i);

    it_region_server_close(&srv);
    free(buf);
}

struct reader {
    struct rpma_conn *conn;
    struct rpma_mr_remote *src;
    struct rpma_mr_local *mr;
    uint64_t *dst;
    atomic_bool started;
    atomic_bool stop;
    long reads, seen_p0, seen_p1, torn;
};

static void *reader_main(void *arg) {
    struct reader *r = arg;
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(r->conn, &cq));
    uintptr_t id = 1;
    while (!atomic_load(&r->stop) || r->reads < MIN_READS) {
        memset(r->dst, 0, RBATCH * 8);
        enum ibv_wc_opcode ops[RBATCH];
        uintptr_t ctxs[RBATCH];
        for (int k = 0; k < RBATCH; k++, id++) {
            ops[k] = IBV_WC_RDMA_READ;
            ctxs[k] = id;
            CHECK_OK(rpma_read(r->conn, r->mr, (size_t)k * 8, r->src, OFF, 8,
                               RPMA_F_COMPLETION_ALWAYS, (void *)id));
        }
        it_cq_expect_set(cq, RBATCH, ops, ctxs, NULL);
        for (int k = 0; k < RBATCH; k++) {
            uint64_t v = r->dst[k];
            if (v == P0)
                r->seen_p0++;
            else if (v == P1)
                r->seen_p1++;
            else if (it_nic())
                r->torn++;
            else
                IT_FAIL("torn read: 0x%016llx is neither pattern", (unsigned long long)v);
            r->reads++;
        }
        atomic_store(&r->started, true);
    }
    return NULL;
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    struct rpma_conn *cw = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    struct rpma_conn *cr = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    struct rpma_mr_remote *dst = it_remote_mr(cw, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(cw, &cq));

    /* misaligned targets are refused at posting, nothing is queued */
    char pat[8];
    uint64_t p = P1;
    memcpy(pat, &p, 8);
    CHECK_ERR(rpma_atomic_write(cw, dst, OFF + 4, pat, RPMA_F_COMPLETION_ALWAYS, (void *)1),
              RPMA_E_INVAL);
    CHECK_ERR(rpma_atomic_write(cw, dst, OFF + 1, pat, RPMA_F_COMPLETION_ALWAYS, (void *)1),
              RPMA_E_INVAL);
    it_cq_expect_empty(cq);

    struct reader r = {.conn = cr, .src = it_remote_mr(cr, 0)};
    r.dst = it_alloc(RBATCH * 8);
    CHECK_OK(rpma_mr_reg(peer, r.dst, RBATCH * 8, RPMA_MR_USAGE_READ_DST, &r.mr));
    atomic_init(&r.started, false);
    atomic_init(&r.stop, false);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, reader_main, &r) == 0);
    long long t0 = it_now_ms();
    while (!atomic_load(&r.started) && it_now_ms() - t0 < IT_WAIT_MS)
        ;
    CHECK(atomic_load(&r.started));

    for (uintptr_t i = 0; i < WRITES; i += WBATCH) {
        enum ibv_wc_opcode ops[WBATCH];
        uintptr_t ctxs[WBATCH];
        for (uintptr_t k = 0; k < WBATCH; k++) {
            /* the source is plain memory and may change right after posting */
            p = ((i + k) % 2) ? P0 : P1;
            memcpy(pat, &p, 8);
            ops[k] = IBV_WC_RDMA_WRITE;
            ctxs[k] = 0x100000 + i + k;
            CHECK_OK(
                rpma_atomic_write(cw, dst, OFF, pat, RPMA_F_COMPLETION_ALWAYS, (void *)ctxs[k]));
        }
        for (int k = 0; k < WBATCH; k++) /* in posting order */
            it_cq_expect(cq, ops[k], (void *)ctxs[k]);
    }
    atomic_store(&r.stop, true);
    CHECK(pthread_join(th, NULL) == 0);
    printf("reads %ld: P0 %ld, P1 %ld, torn %ld\n", r.reads, r.seen_p0, r.seen_p1, r.torn);
    CHECK(r.reads >= MIN_READS);

    /* after all writes completed the target holds the last one */
    struct rpma_cq *rcq = NULL;
    CHECK_OK(rpma_conn_get_cq(cr, &rcq));
    CHECK_OK(rpma_read(cr, r.mr, 0, r.src, OFF, 8, RPMA_F_COMPLETION_ALWAYS, (void *)7));
    it_cq_expect(rcq, IBV_WC_RDMA_READ, (void *)7);
    CHECK(r.dst[0] == ((WRITES - 1) % 2 ? P0 : P1));

    CHECK_OK(rpma_mr_remote_delete(&dst));
    CHECK_OK(rpma_mr_remote_delete(&r.src));
    it_disconnect_active(&cw);
    it_disconnect_active(&cr);
    CHECK_OK(rpma_mr_dereg(&r.mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(r.dst);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
