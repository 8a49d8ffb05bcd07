/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * srq.c -- a server with a shared receive queue serves three connections from one client
 * process: every receive completion comes on the SRQ's RCQ (none on the connections' CQs, and
 * rpma_conn_get_rcq gives NULL), and wc.qp_num names the receiving connection
 * (rpma_conn_get_qp_num), which tells the senders apart. Each sender's messages arrive in order.
 * The connections' cfg asks for an RCQ as well: the SRQ's own RCQ wins, as upstream's does. An
 * SRQ of 0 receives is refused first.
 */
#define _GNU_SOURCE
#include <string.h>

#include "common.h"

#define CONNS 3
#define PER_CONN 10
#define MSG 40
#define TOTAL (CONNS * PER_CONN)

static uint64_t seed(int sender, int seq) {
    return 0x5e0000 + (uint64_t)sender * 1000 + (uint64_t)seq;
}

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *rbuf = it_alloc(TOTAL * MSG);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, rbuf, TOTAL * MSG, RPMA_MR_USAGE_RECV, &mr));

    struct rpma_srq_cfg *scfg = NULL;
    CHECK_OK(rpma_srq_cfg_new(&scfg));
    /* an SRQ of no receives is refused, as ibv_create_srq refuses it */
    CHECK_OK(rpma_srq_cfg_set_rq_size(scfg, 0));
    struct rpma_srq *none = NULL;
    CHECK_ERR(rpma_srq_new(peer, scfg, &none), RPMA_E_PROVIDER);
    CHECK(none == NULL);
    CHECK_OK(rpma_srq_cfg_set_rq_size(scfg, 100));
    CHECK_OK(rpma_srq_cfg_set_rcq_size(scfg, 100));
    struct rpma_srq *srq = NULL;
    CHECK_OK(rpma_srq_new(peer, scfg, &srq));
    struct rpma_cq *srcq = NULL;
    CHECK_OK(rpma_srq_get_rcq(srq, &srcq));
    CHECK(srcq != NULL);
    for (uintptr_t i = 0; i < TOTAL; i++)
        CHECK_OK(rpma_srq_recv(srq, mr, i * MSG, MSG, (void *)(0x7000 + i)));

    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_srq(cfg, srq));
    /* an RCQ size too: the SRQ's RCQ still takes every receive, and the connection has none */
    CHECK_OK(rpma_conn_cfg_set_rcq_size(cfg, 8));
    struct rpma_srq *got_srq = NULL;
    CHECK_OK(rpma_conn_cfg_get_srq(cfg, &got_srq));
    CHECK(got_srq == srq);

    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();

    struct rpma_conn *conns[CONNS];
    uint32_t qp[CONNS];
    int sender[CONNS];
    for (int k = 0; k < CONNS; k++) {
        struct rpma_conn_req *req = it_next_req(ep, cfg);
        struct rpma_conn_private_data pd = {0};
        CHECK_OK(rpma_conn_req_get_private_data(req, &pd));
        CHECK_EQ(pd.len, IT_PDATA_CONNECT);
        sender[k] = *(unsigned char *)pd.ptr;
        CHECK(sender[k] < CONNS);
        for (int j = 0; j < k; j++) CHECK(sender[j] != sender[k]);
        conns[k] = it_accept(&req, NULL, 0);
        CHECK_OK(rpma_conn_get_qp_num(conns[k], &qp[k]));
        for (int j = 0; j < k; j++) CHECK(qp[j] != qp[k]);
        struct rpma_cq *rcq = (struct rpma_cq *)1;
        CHECK_OK(rpma_conn_get_rcq(conns[k], &rcq));
        CHECK(rcq == NULL); /* the SRQ's RCQ takes the receives */
    }

    int next_seq[CONNS] = {0};
    bool used[TOTAL] = {false};
    for (int m = 0; m < TOTAL; m++) {
        struct ibv_wc wc;
        it_cq_get(srcq, &wc);
        CHECK_EQ(wc.status, IBV_WC_SUCCESS);
        CHECK_EQ(wc.opcode, IBV_WC_RECV);
        CHECK_EQ(wc.byte_len, MSG);
        CHECK(wc.wr_id >= 0x7000 && wc.wr_id < 0x7000 + TOTAL);
        int slot = (int)(wc.wr_id - 0x7000);
        CHECK(!used[slot]);
        used[slot] = true;
        int k = 0;
        while (k < CONNS && qp[k] != wc.qp_num) k++;
        if (k == CONNS) IT_FAIL("wc.qp_num %u matches no connection", wc.qp_num);
        int s = sender[k];
        CHECK(next_seq[s] < PER_CONN);
        long bad = it_verify(rbuf + slot * MSG, MSG, seed(s, next_seq[s]));
        if (bad >= 0)
            IT_FAIL("message from sender %d (qp %u) seq %d differs at byte %ld", s, wc.qp_num,
                    next_seq[s], bad);
        next_seq[s]++;
    }
    it_cq_expect_empty(srcq);
    for (int k = 0; k < CONNS; k++) {
        CHECK_EQ(next_seq[sender[k]], PER_CONN);
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conns[k], &cq));
        it_cq_expect_empty(cq);
    }
    for (int k = 0; k < CONNS; k++) it_disconnect_passive(&conns[k], false);

    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_srq_delete(&srq));
    CHECK_OK(rpma_srq_cfg_delete(&scfg));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(rbuf);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *sbuf = it_alloc(TOTAL * MSG);
    for (int s = 0; s < CONNS; s++)
        for (int q = 0; q < PER_CONN; q++)
            it_fill(sbuf + (s * PER_CONN + q) * MSG, MSG, seed(s, q));
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, sbuf, TOTAL * MSG, RPMA_MR_USAGE_SEND, &mr));
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, PER_CONN));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, PER_CONN));

    struct rpma_conn *conns[CONNS];
    for (int s = 0; s < CONNS; s++) {
        unsigned char id = (unsigned char)s;
        conns[s] = it_connect(peer, a->addr, a->port, cfg, &id, 1);
    }
    /* interleave the senders */
    for (int q = 0; q < PER_CONN; q++)
        for (int s = 0; s < CONNS; s++)
            CHECK_OK(rpma_send(conns[s], mr, (size_t)(s * PER_CONN + q) * MSG, MSG,
                               RPMA_F_COMPLETION_ALWAYS,
                               (void *)(uintptr_t)(0x8000 + s * 100 + q)));
    for (int s = 0; s < CONNS; s++) {
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conns[s], &cq));
        for (int q = 0; q < PER_CONN; q++)
            it_cq_expect(cq, IBV_WC_SEND, (void *)(uintptr_t)(0x8000 + s * 100 + q));
        it_cq_expect_empty(cq);
    }
    for (int s = 0; s < CONNS; s++) it_disconnect_active(&conns[s]);
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(sbuf);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
