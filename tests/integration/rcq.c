/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rcq.c -- a connection configured with rcq_size > 0 gets a separate receive CQ: its receive
 * completions arrive there and never on the main CQ, and send completions never on the RCQ.
 * The client keeps the default cfg: no RCQ, so its receives complete on the main CQ.
 */
#define _GNU_SOURCE
#include <string.h>

#include "common.h"

#define MSG 48
#define N_UP 3   /* client -> server */
#define N_DOWN 2 /* server -> client */
#define SEED_UP 0x0c10
#define SEED_DOWN 0x0c20

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *rbuf = it_alloc(N_UP * MSG), *sbuf = it_alloc(N_DOWN * MSG);
    for (int i = 0; i < N_DOWN; i++) it_fill(sbuf + i * MSG, MSG, SEED_DOWN + (uint64_t)i);
    struct rpma_mr_local *rmr = NULL, *smr = NULL;
    CHECK_OK(rpma_mr_reg(peer, rbuf, N_UP * MSG, RPMA_MR_USAGE_RECV, &rmr));
    CHECK_OK(rpma_mr_reg(peer, sbuf, N_DOWN * MSG, RPMA_MR_USAGE_SEND, &smr));
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_rcq_size(cfg, 10));

    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn_req *req = it_next_req(ep, cfg);
    struct rpma_conn *conn = it_accept_with_recvs(&req, rmr, N_UP, MSG, 0x100, NULL, 0);

    struct rpma_cq *cq = NULL, *rcq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    CHECK_OK(rpma_conn_get_rcq(conn, &rcq));
    CHECK(cq != NULL && rcq != NULL && cq != rcq);
    int cq_fd = -1, rcq_fd = -1;
    CHECK_OK(rpma_cq_get_fd(cq, &cq_fd));
    CHECK_OK(rpma_cq_get_fd(rcq, &rcq_fd));
    CHECK(cq_fd >= 0 && rcq_fd >= 0 && cq_fd != rcq_fd);

    /* receives: on the RCQ; each message i carries seed SEED_UP + i in whichever buffer */
    bool used[N_UP] = {false};
    for (int m = 0; m < N_UP; m++) {
        struct ibv_wc wc;
        it_cq_get(rcq, &wc);
        CHECK_EQ(wc.status, IBV_WC_SUCCESS);
        CHECK_EQ(wc.opcode, IBV_WC_RECV);
        CHECK_EQ(wc.byte_len, MSG);
        CHECK(wc.wr_id >= 0x100 && wc.wr_id < 0x100 + N_UP);
        CHECK_EQ(it_verify(rbuf + (wc.wr_id - 0x100) * MSG, MSG, SEED_UP + (uint64_t)m), -1);
        CHECK(!used[wc.wr_id - 0x100]);
        used[wc.wr_id - 0x100] = true;
    }
    it_cq_expect_empty(cq);

    /* sends: on the main CQ */
    for (uintptr_t i = 0; i < N_DOWN; i++)
        CHECK_OK(rpma_send(conn, smr, i * MSG, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)(0x200 + i)));
    for (uintptr_t i = 0; i < N_DOWN; i++) it_cq_expect(cq, IBV_WC_SEND, (void *)(0x200 + i));
    it_cq_expect_empty(rcq);
    it_cq_expect_empty(cq);

    it_disconnect_passive(&conn, false);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&rmr));
    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(rbuf);
    free(sbuf);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *rbuf = it_alloc(N_DOWN * MSG), *sbuf = it_alloc(N_UP * MSG);
    for (int i = 0; i < N_UP; i++) it_fill(sbuf + i * MSG, MSG, SEED_UP + (uint64_t)i);
    struct rpma_mr_local *rmr = NULL, *smr = NULL;
    CHECK_OK(rpma_mr_reg(peer, rbuf, N_DOWN * MSG, RPMA_MR_USAGE_RECV, &rmr));
    CHECK_OK(rpma_mr_reg(peer, sbuf, N_UP * MSG, RPMA_MR_USAGE_SEND, &smr));
    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    struct rpma_cq *cq = NULL, *rcq = (struct rpma_cq *)1;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    CHECK_OK(rpma_conn_get_rcq(conn, &rcq));
    CHECK(rcq == NULL);

    for (uintptr_t i = 0; i < N_DOWN; i++)
        CHECK_OK(rpma_recv(conn, rmr, i * MSG, MSG, (void *)(0x300 + i)));
    for (uintptr_t i = 0; i < N_UP; i++)
        CHECK_OK(rpma_send(conn, smr, i * MSG, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)(0x400 + i)));

    /* without an RCQ everything completes on the main CQ */
    enum ibv_wc_opcode ops[N_UP + N_DOWN];
    uintptr_t ctxs[N_UP + N_DOWN];
    struct ibv_wc wcs[N_UP + N_DOWN];
    for (int i = 0; i < N_UP; i++) {
        ops[i] = IBV_WC_SEND;
        ctxs[i] = 0x400 + (uintptr_t)i;
    }
    for (int i = 0; i < N_DOWN; i++) {
        ops[N_UP + i] = IBV_WC_RECV;
        ctxs[N_UP + i] = 0x300 + (uintptr_t)i;
    }
    it_cq_expect_set(cq, N_UP + N_DOWN, ops, ctxs, wcs);
    /* both messages arrived, each in one of the buffers */
    bool seen[N_DOWN] = {false};
    for (int i = 0; i < N_DOWN; i++) {
        CHECK_EQ(wcs[N_UP + i].byte_len, MSG);
        int found = -1;
        for (int s = 0; s < N_DOWN; s++)
            if (it_verify(rbuf + i * MSG, MSG, SEED_DOWN + (uint64_t)s) == -1) found = s;
        CHECK(found >= 0 && !seen[found]);
        seen[found] = true;
    }
    it_cq_expect_empty(cq);

    it_disconnect_active(&conn);
    CHECK_OK(rpma_mr_dereg(&rmr));
    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(rbuf);
    free(sbuf);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
