/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shared_channel_order.c -- causal completion order seen through a shared completion channel.
 *
 * rpma's own guarantee, beyond RDMA's (soft-RoCE breaks it: the reference run exempts this test,
 * docs/testing.md). The idea: the responder's NIC acknowledges a message when it arrives, before the responder's
 * application sees it. So when the server answers the client's message, the client always gets
 * the completion of its own send before the receive of the answer, and the server gets the
 * completion of its answer's send before the receive of the client's next message.
 *
 * Both sides use a conn cfg with a shared completion channel and an RCQ, and wait as the man
 * pages say: rpma_conn_wait names the CQ that fired, rpma_cq_get_wc drains it. Each round the
 * client posts a receive, sends a message (signaled) and waits: the first completion it obtains
 * must be the IBV_WC_SEND from the CQ, the second the IBV_WC_RECV of the answer from the RCQ.
 * The server, on each receive, posts the next receive and sends the answer; the receive of
 * message k must come after the completion of answer k-1's send.
 *
 * Arguments (both roles): [CONNS [ROUNDS]], default 20 connections of 1000 rounds, one after
 * the other.
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "common.h"

#define MSG 32
#define SEED_PING 0xc0000000ULL
#define SEED_PONG 0xd0000000ULL
#define WR_RECV 0x1000
#define WR_SEND 0x2000
#define ALARM_S 45

static int conns_n = 20;
static int rounds_n = 1000;

static const char *op_name(enum ibv_wc_opcode op) {
    switch (op) {
        case IBV_WC_SEND:
            return "IBV_WC_SEND";
        case IBV_WC_RECV:
            return "IBV_WC_RECV";
        default:
            return "another opcode";
    }
}

static struct rpma_conn_cfg *make_cfg(void) {
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, 8));
    CHECK_OK(rpma_conn_cfg_set_rcq_size(cfg, 8));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, 4));
    CHECK_OK(rpma_conn_cfg_set_rq_size(cfg, 4));
    CHECK_OK(rpma_conn_cfg_set_compl_channel(cfg, true));
    return cfg;
}

/* one wait on the shared channel: the CQ that fired, whether it is the RCQ */
static struct rpma_cq *wait_channel(struct rpma_conn *conn, int fd, bool *is_rcq, const char *who,
                                    int c, int round) {
    if (!it_poll_fd(fd, IT_WAIT_MS))
        IT_FAIL("%s: connection %d round %d: no completion event within %d ms", who, c, round,
                IT_WAIT_MS);
    struct rpma_cq *fired = NULL;
    *is_rcq = false;
    int ret = rpma_conn_wait(conn, 0, &fired, is_rcq);
    if (ret == RPMA_E_NO_COMPLETION) return NULL; /* nothing this time: wait again */
    if (ret != 0)
        IT_FAIL("%s: connection %d round %d: rpma_conn_wait returned %d (%s)", who, c, round, ret,
                rpma_err_2str(ret));
    CHECK(fired != NULL);
    return fired;
}

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *rbuf = it_alloc(MSG), *sbuf = it_alloc(MSG);
    struct rpma_mr_local *rmr = NULL, *smr = NULL;
    CHECK_OK(rpma_mr_reg(peer, rbuf, MSG, RPMA_MR_USAGE_RECV, &rmr));
    CHECK_OK(rpma_mr_reg(peer, sbuf, MSG, RPMA_MR_USAGE_SEND, &smr));
    struct rpma_conn_cfg *cfg = make_cfg();
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();

    for (int c = 0; c < conns_n; c++) {
        struct rpma_conn_req *req = it_next_req(ep, cfg);
        CHECK_OK(rpma_conn_req_recv(req, rmr, 0, MSG, (void *)WR_RECV));
        struct rpma_conn *conn = it_accept(&req, NULL, 0);
        struct rpma_cq *cq = NULL, *rcq = NULL;
        CHECK_OK(rpma_conn_get_cq(conn, &cq));
        CHECK_OK(rpma_conn_get_rcq(conn, &rcq));
        CHECK(cq != NULL && rcq != NULL && cq != rcq);
        int fd = -1;
        CHECK_OK(rpma_conn_get_compl_fd(conn, &fd));

        int recv_done = 0, send_done = 0;
        while (recv_done < rounds_n || send_done < rounds_n) {
            bool is_rcq = false;
            struct rpma_cq *fired = wait_channel(conn, fd, &is_rcq, "server", c, recv_done);
            if (!fired) continue;
            CHECK(fired == (is_rcq ? rcq : cq));
            struct ibv_wc wc[4];
            int got = 0, ret;
            /*
             * One batch per channel event: draining the RCQ in a loop could take a receive that
             * arrived after the CQ's event for the answer before, while that event still waits.
             */
            if ((ret = rpma_cq_get_wc(fired, 4, wc, &got)) == 0) {
                CHECK(got >= 1 && got <= 4);
                for (int k = 0; k < got; k++) {
                    if (wc[k].status != IBV_WC_SUCCESS)
                        IT_FAIL("server: connection %d: completion %s failed: %s", c,
                                op_name(wc[k].opcode), it_wc_status_str(wc[k].status));
                    if (!is_rcq) {
                        CHECK_EQ(wc[k].opcode, IBV_WC_SEND);
                        CHECK_EQ(wc[k].wr_id, WR_SEND);
                        CHECK(send_done < recv_done);
                        send_done++;
                        continue;
                    }
                    CHECK_EQ(wc[k].opcode, IBV_WC_RECV);
                    CHECK_EQ(wc[k].wr_id, WR_RECV);
                    CHECK_EQ(wc[k].byte_len, MSG);
                    int r = recv_done;
                    if (r >= rounds_n)
                        IT_FAIL("server: connection %d: a receive after the last round", c);
                    /* the answer to message r-1 was acknowledged before message r was sent */
                    if (send_done != r)
                        IT_FAIL(
                            "server: connection %d round %d: the IBV_WC_RECV of message %d "
                            "came before the IBV_WC_SEND of the answer to message %d (causal "
                            "completion order violated)",
                            c, r, r, r - 1);
                    long bad = it_verify(rbuf, MSG, SEED_PING + (uint64_t)c * 100000 + r);
                    if (bad >= 0)
                        IT_FAIL("server: connection %d round %d: message differs at byte %ld", c, r,
                                bad);
                    recv_done++;
                    if (recv_done < rounds_n)
                        CHECK_OK(rpma_recv(conn, rmr, 0, MSG, (void *)WR_RECV));
                    it_fill(sbuf, MSG, SEED_PONG + (uint64_t)c * 100000 + r);
                    CHECK_OK(
                        rpma_send(conn, smr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_SEND));
                }
            } else if (ret != RPMA_E_NO_COMPLETION) {
                IT_FAIL("server: rpma_cq_get_wc returned %d (%s)", ret, rpma_err_2str(ret));
            }
        }
        it_cq_expect_empty(cq);
        it_cq_expect_empty(rcq);
        it_disconnect_passive(&conn, false);
    }
    printf("server: %d connections x %d rounds in causal order\n", conns_n, rounds_n);

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
    struct rpma_conn_cfg *cfg = make_cfg();
    long long t0 = it_now_ms();

    for (int c = 0; c < conns_n; c++) {
        struct rpma_conn *conn = it_connect(peer, a->addr, a->port, cfg, NULL, 0);
        struct rpma_cq *cq = NULL, *rcq = NULL;
        CHECK_OK(rpma_conn_get_cq(conn, &cq));
        CHECK_OK(rpma_conn_get_rcq(conn, &rcq));
        CHECK(cq != NULL && rcq != NULL && cq != rcq);
        int fd = -1;
        CHECK_OK(rpma_conn_get_compl_fd(conn, &fd));

        for (int r = 0; r < rounds_n; r++) {
            CHECK_OK(rpma_recv(conn, rmr, 0, MSG, (void *)WR_RECV));
            it_fill(sbuf, MSG, SEED_PING + (uint64_t)c * 100000 + r);
            CHECK_OK(rpma_send(conn, smr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_SEND));
            int seen = 0;
            while (seen < 2) {
                bool is_rcq = false;
                struct rpma_cq *fired = wait_channel(conn, fd, &is_rcq, "client", c, r);
                if (!fired) continue;
                CHECK(fired == (is_rcq ? rcq : cq));
                struct ibv_wc wc[2];
                int got = 0, ret;
                while ((ret = rpma_cq_get_wc(fired, 2, wc, &got)) == 0) {
                    CHECK(got >= 1 && got <= 2);
                    for (int k = 0; k < got; k++, seen++) {
                        if (wc[k].status != IBV_WC_SUCCESS)
                            IT_FAIL("client: connection %d round %d: completion %s failed: %s", c,
                                    r, op_name(wc[k].opcode), it_wc_status_str(wc[k].status));
                        const char *from = is_rcq ? "RCQ" : "CQ";
                        if (seen == 0 && (wc[k].opcode != IBV_WC_SEND || is_rcq))
                            IT_FAIL(
                                "client: connection %d round %d: the first completion is %s "
                                "from the %s, expected the IBV_WC_SEND of the message from "
                                "the CQ (the answer's receive overtook the completion of the "
                                "message it answers: causal completion order violated)",
                                c, r, op_name(wc[k].opcode), from);
                        if (seen == 1 && (wc[k].opcode != IBV_WC_RECV || !is_rcq))
                            IT_FAIL(
                                "client: connection %d round %d: the second completion is %s "
                                "from the %s, expected the IBV_WC_RECV of the answer from "
                                "the RCQ",
                                c, r, op_name(wc[k].opcode), from);
                        if (seen >= 2)
                            IT_FAIL(
                                "client: connection %d round %d: a third completion (%s "
                                "from the %s)",
                                c, r, op_name(wc[k].opcode), from);
                        CHECK_EQ(wc[k].wr_id, seen == 0 ? WR_SEND : WR_RECV);
                        if (seen == 1) CHECK_EQ(wc[k].byte_len, MSG);
                    }
                }
                if (ret != RPMA_E_NO_COMPLETION)
                    IT_FAIL("client: rpma_cq_get_wc returned %d (%s)", ret, rpma_err_2str(ret));
            }
            long bad = it_verify(rbuf, MSG, SEED_PONG + (uint64_t)c * 100000 + r);
            if (bad >= 0)
                IT_FAIL("client: connection %d round %d: answer differs at byte %ld", c, r, bad);
        }
        it_cq_expect_empty(cq);
        it_cq_expect_empty(rcq);
        it_disconnect_active(&conn);
    }
    printf("client: %d connections x %d rounds in causal order, %lld ms\n", conns_n, rounds_n,
           it_now_ms() - t0);

    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&rmr));
    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(rbuf);
    free(sbuf);
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    alarm(ALARM_S);
    if (a.argc >= 1) conns_n = atoi(a.argv[0]);
    if (a.argc >= 2) rounds_n = atoi(a.argv[1]);
    CHECK(conns_n > 0 && rounds_n > 0 && rounds_n < 100000);
    if (a.server)
        server(&a);
    else
        client(&a);
    return 0;
}
