/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shared_channel.c -- a connection with a shared completion channel (and an RCQ): one fd serves
 * both CQs, rpma_conn_wait says which CQ fired (is_rcq), rpma_cq_wait refuses with
 * RPMA_E_SHARED_CHANNEL. The client has no shared channel: rpma_conn_wait gives
 * RPMA_E_NOT_SHARED_CHNL there.
 */
#define _GNU_SOURCE
#include <string.h>

#include "common.h"

#define ROUNDS 20
#define MSG 32
#define SEED_PING 0x5c00
#define SEED_PONG 0x5d00

struct srv {
    struct rpma_conn *conn;
    struct rpma_cq *cq, *rcq;
    int fd;
    int recv_done, send_done; /* completions seen so far */
    int cq_events, rcq_events;
};

/* waits on the shared channel once and drains the CQ it names */
static void pump(struct srv *s) {
    if (!it_poll_fd(s->fd, IT_WAIT_MS))
        IT_FAIL("no completion event on the shared channel within %d ms", IT_WAIT_MS);
    struct rpma_cq *fired = NULL;
    bool is_rcq = false;
    CHECK_OK(rpma_conn_wait(s->conn, 0, &fired, &is_rcq));
    CHECK(fired == s->cq || fired == s->rcq);
    CHECK_EQ(is_rcq, fired == s->rcq);
    if (is_rcq)
        s->rcq_events++;
    else
        s->cq_events++;
    struct ibv_wc wc[4];
    int got = 0, ret;
    while ((ret = rpma_cq_get_wc(fired, 4, wc, &got)) == 0) {
        CHECK(got >= 1 && got <= 4);
        for (int k = 0; k < got; k++) {
            CHECK_EQ(wc[k].status, IBV_WC_SUCCESS);
            if (is_rcq) { /* only receives here */
                CHECK_EQ(wc[k].opcode, IBV_WC_RECV);
                CHECK_EQ(wc[k].wr_id, 0x1000 + (uint64_t)s->recv_done);
                CHECK_EQ(wc[k].byte_len, MSG);
                s->recv_done++;
            } else { /* only sends here */
                CHECK_EQ(wc[k].opcode, IBV_WC_SEND);
                CHECK_EQ(wc[k].wr_id, 0x2000 + (uint64_t)s->send_done);
                s->send_done++;
            }
        }
    }
    CHECK_EQ(ret, RPMA_E_NO_COMPLETION);
}

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *rbuf = it_alloc(MSG), *sbuf = it_alloc(MSG);
    struct rpma_mr_local *rmr = NULL, *smr = NULL;
    CHECK_OK(rpma_mr_reg(peer, rbuf, MSG, RPMA_MR_USAGE_RECV, &rmr));
    CHECK_OK(rpma_mr_reg(peer, sbuf, MSG, RPMA_MR_USAGE_SEND, &smr));
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_rcq_size(cfg, 10));
    CHECK_OK(rpma_conn_cfg_set_compl_channel(cfg, true));
    bool shared = false;
    CHECK_OK(rpma_conn_cfg_get_compl_channel(cfg, &shared));
    CHECK(shared);

    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn_req *req = it_next_req(ep, cfg);
    struct srv s = {0};
    s.conn = it_accept_with_recvs(&req, rmr, 1, MSG, 0x1000, NULL, 0);
    CHECK_OK(rpma_conn_get_cq(s.conn, &s.cq));
    CHECK_OK(rpma_conn_get_rcq(s.conn, &s.rcq));
    CHECK(s.cq != NULL && s.rcq != NULL && s.cq != s.rcq);

    /* one fd for everything */
    int fd_cq = -1, fd_rcq = -1;
    CHECK_OK(rpma_conn_get_compl_fd(s.conn, &s.fd));
    CHECK_OK(rpma_cq_get_fd(s.cq, &fd_cq));
    CHECK_OK(rpma_cq_get_fd(s.rcq, &fd_rcq));
    CHECK(s.fd >= 0);
    CHECK_EQ(fd_cq, s.fd);
    CHECK_EQ(fd_rcq, s.fd);
    CHECK_ERR(rpma_cq_wait(s.cq), RPMA_E_SHARED_CHANNEL);
    CHECK_ERR(rpma_cq_wait(s.rcq), RPMA_E_SHARED_CHANNEL);

    for (int i = 0; i < ROUNDS; i++) {
        /* this round's ping, and the previous pong's send completion */
        while (s.recv_done < i + 1 || s.send_done < i) pump(&s);
        CHECK_EQ(it_verify(rbuf, MSG, SEED_PING + (uint64_t)i), -1);
        if (i + 1 < ROUNDS)
            CHECK_OK(rpma_recv(s.conn, rmr, 0, MSG, (void *)(0x1000 + (uintptr_t)i + 1)));
        it_fill(sbuf, MSG, SEED_PONG + (uint64_t)i);
        CHECK_OK(rpma_send(s.conn, smr, 0, MSG, RPMA_F_COMPLETION_ALWAYS,
                           (void *)(0x2000 + (uintptr_t)i)));
    }
    while (s.send_done < ROUNDS) pump(&s);
    CHECK_EQ(s.recv_done, ROUNDS);
    CHECK(s.cq_events > 0 && s.rcq_events > 0);
    it_cq_expect_empty(s.cq);
    it_cq_expect_empty(s.rcq);
    printf("events: cq %d, rcq %d\n", s.cq_events, s.rcq_events);

    it_disconnect_passive(&s.conn, false);
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
    char *rbuf = it_alloc(MSG), *sbuf = it_alloc(MSG);
    struct rpma_mr_local *rmr = NULL, *smr = NULL;
    CHECK_OK(rpma_mr_reg(peer, rbuf, MSG, RPMA_MR_USAGE_RECV, &rmr));
    CHECK_OK(rpma_mr_reg(peer, sbuf, MSG, RPMA_MR_USAGE_SEND, &smr));
    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    struct rpma_cq *fired = NULL;
    bool is_rcq = false;
    CHECK_ERR(rpma_conn_wait(conn, 0, &fired, &is_rcq), RPMA_E_NOT_SHARED_CHNL);

    for (int i = 0; i < ROUNDS; i++) {
        CHECK_OK(rpma_recv(conn, rmr, 0, MSG, (void *)(0x3000 + (uintptr_t)i)));
        it_fill(sbuf, MSG, SEED_PING + (uint64_t)i);
        CHECK_OK(rpma_send(conn, smr, 0, MSG, RPMA_F_COMPLETION_ALWAYS,
                           (void *)(0x4000 + (uintptr_t)i)));
        enum ibv_wc_opcode ops[2] = {IBV_WC_SEND, IBV_WC_RECV};
        uintptr_t ctxs[2] = {0x4000 + (uintptr_t)i, 0x3000 + (uintptr_t)i};
        it_cq_expect_set(cq, 2, ops, ctxs, NULL);
        CHECK_EQ(it_verify(rbuf, MSG, SEED_PONG + (uint64_t)i), -1);
    }
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
