/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pingpong.c -- messages with rpma_send/rpma_recv: the server posts its first receive with
 * rpma_conn_req_recv before accepting, then answers each ping with a pong; every message's
 * bytes, length, opcode and wr_id are checked on both sides.
 */
#define _GNU_SOURCE
#include <string.h>

#include "common.h"

#define ROUNDS 200
#define MSG 64

static uint64_t ping_seed(int i) {
    return 0x9000 + 2 * (uint64_t)i;
}
static uint64_t pong_seed(int i) {
    return 0x9000 + 2 * (uint64_t)i + 1;
}

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *sbuf = it_alloc(MSG), *rbuf = it_alloc(MSG);
    struct rpma_mr_local *smr = NULL, *rmr = NULL;
    CHECK_OK(rpma_mr_reg(peer, sbuf, MSG, RPMA_MR_USAGE_SEND, &smr));
    CHECK_OK(rpma_mr_reg(peer, rbuf, MSG, RPMA_MR_USAGE_RECV, &rmr));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();

    struct rpma_conn_req *req = it_next_req(ep, NULL);
    struct rpma_conn *conn = it_accept_with_recvs(&req, rmr, 1, MSG, 0x10000, NULL, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    for (int i = 0; i < ROUNDS; i++) {
        /* this round's ping and the previous round's pong completion, in any order */
        enum ibv_wc_opcode ops[2] = {IBV_WC_RECV, IBV_WC_SEND};
        uintptr_t ctxs[2] = {0x10000 + (uintptr_t)i, 0x20000 + (uintptr_t)i - 1};
        struct ibv_wc wcs[2];
        it_cq_expect_set(cq, i == 0 ? 1 : 2, ops, ctxs, wcs);
        CHECK_EQ(wcs[0].byte_len, MSG);
        long bad = it_verify(rbuf, MSG, ping_seed(i));
        if (bad >= 0) IT_FAIL("ping %d differs at byte %ld", i, bad);
        if (i + 1 < ROUNDS)
            CHECK_OK(rpma_recv(conn, rmr, 0, MSG, (void *)(0x10000 + (uintptr_t)i + 1)));
        it_fill(sbuf, MSG, pong_seed(i));
        CHECK_OK(rpma_send(conn, smr, 0, MSG, RPMA_F_COMPLETION_ALWAYS,
                           (void *)(0x20000 + (uintptr_t)i)));
    }
    it_cq_expect(cq, IBV_WC_SEND, (void *)(0x20000 + (uintptr_t)ROUNDS - 1));
    it_disconnect_passive(&conn, false);

    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_mr_dereg(&rmr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(sbuf);
    free(rbuf);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *sbuf = it_alloc(MSG), *rbuf = it_alloc(MSG);
    struct rpma_mr_local *smr = NULL, *rmr = NULL;
    CHECK_OK(rpma_mr_reg(peer, sbuf, MSG, RPMA_MR_USAGE_SEND, &smr));
    CHECK_OK(rpma_mr_reg(peer, rbuf, MSG, RPMA_MR_USAGE_RECV, &rmr));
    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    for (int i = 0; i < ROUNDS; i++) {
        memset(rbuf, 0, MSG);
        CHECK_OK(rpma_recv(conn, rmr, 0, MSG, (void *)(0x30000 + (uintptr_t)i)));
        it_fill(sbuf, MSG, ping_seed(i));
        CHECK_OK(rpma_send(conn, smr, 0, MSG, RPMA_F_COMPLETION_ALWAYS,
                           (void *)(0x40000 + (uintptr_t)i)));
        enum ibv_wc_opcode ops[2] = {IBV_WC_SEND, IBV_WC_RECV};
        uintptr_t ctxs[2] = {0x40000 + (uintptr_t)i, 0x30000 + (uintptr_t)i};
        struct ibv_wc wcs[2];
        it_cq_expect_set(cq, 2, ops, ctxs, wcs);
        CHECK_EQ(wcs[1].byte_len, MSG);
        CHECK((wcs[1].wc_flags & IBV_WC_WITH_IMM) == 0);
        long bad = it_verify(rbuf, MSG, pong_seed(i));
        if (bad >= 0) IT_FAIL("pong %d differs at byte %ld", i, bad);
    }
    it_cq_expect_empty(cq);
    it_disconnect_active(&conn);

    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_mr_dereg(&rmr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(sbuf);
    free(rbuf);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
