/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recv_dereg.c -- a send arrives for a receive whose buffer was deregistered.
 *
 * usage: recv_dereg PORT
 *
 * Three rounds, each on its own connection: the server posts a receive (round 0 with
 * rpma_conn_req_recv before accepting, round 1 with rpma_recv on the established connection,
 * round 2 with rpma_srq_recv on the SRQ the connection receives through), deregisters that buffer's
 * region, fills the buffer with a marker and only then lets the client send 64 bytes. As on a NIC,
 * where the receive WQE's lkey is no longer valid:
 *   - the receive completes IBV_WC_LOC_PROT_ERR (rxe: IBV_WC_LOC_QP_OP_ERR, its answer to a
 *     failed lkey lookup) and the buffer keeps the marker;
 *   - the send completes IBV_WC_REM_OP_ERR (the responder's NAK for a local error), never
 *     SUCCESS.
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "mem_common.h"

#define RLEN 4096
#define MSG 64
#define MARK 0xee
#define WR_RECV 77
#define WR_SEND 88

static const char *g_port;

static void server(int ctl, void *arg) {
    (void)arg;
    struct rpma_peer *peer = it_peer_new(MT_ADDR, true);
    char *rb = it_alloc(RLEN);
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, MT_ADDR, g_port, &ep));
    struct rpma_conn_cfg *cfg = mt_cfg(8);
    struct rpma_srq_cfg *srq_cfg = NULL;
    CHECK_OK(rpma_srq_cfg_new(&srq_cfg));
    CHECK_OK(rpma_srq_cfg_set_rq_size(srq_cfg, 4));
    CHECK_OK(rpma_srq_cfg_set_rcq_size(srq_cfg, 4));
    struct rpma_srq *srq = NULL;
    CHECK_OK(rpma_srq_new(peer, srq_cfg, &srq));
    struct rpma_conn_cfg *with_srq = mt_cfg(8);
    CHECK_OK(rpma_conn_cfg_set_srq(with_srq, srq));
    mt_say(ctl, "READY");
    char msg[MT_MSG];
    for (int round = 0; round < 3; round++) {
        memset(rb, 0, RLEN);
        struct rpma_mr_local *mr = NULL;
        CHECK_OK(rpma_mr_reg(peer, rb, RLEN, RPMA_MR_USAGE_RECV, &mr));
        struct rpma_conn_req *req = it_next_req(ep, round == 2 ? with_srq : cfg);
        if (round == 0) CHECK_OK(rpma_conn_req_recv(req, mr, 0, RLEN, (void *)WR_RECV));
        struct rpma_conn *conn = it_accept(&req, NULL, 0);
        if (round == 1) CHECK_OK(rpma_recv(conn, mr, 0, RLEN, (void *)WR_RECV));
        if (round == 2) CHECK_OK(rpma_srq_recv(srq, mr, 0, RLEN, (void *)WR_RECV));
        CHECK_OK(rpma_mr_dereg(&mr));
        memset(rb, MARK, RLEN);
        mt_say(ctl, "GO");

        struct rpma_cq *cq = NULL;
        if (round == 2)
            CHECK_OK(rpma_srq_get_rcq(srq, &cq));
        else
            CHECK_OK(rpma_conn_get_cq(conn, &cq));
        struct ibv_wc wc;
        int st = -1;
        if (it_cq_next(cq, &wc, 10000)) {
            CHECK_EQ(wc.wr_id, WR_RECV);
            st = (int)wc.status;
        }
        bool intact_now = mt_all_bytes(rb, RLEN, MARK);
        mt_expect(ctl, "DONE", msg, 30000);
        enum rpma_conn_event ev = mt_next_event(conn, 15000);
        if (ev != RPMA_CONN_CLOSED && ev != RPMA_CONN_LOST)
            IT_FAIL("round %d: event %s", round, rpma_utils_conn_event_2str(ev));
        (void)rpma_conn_disconnect(conn);
        CHECK_OK(rpma_conn_delete(&conn));
        mt_say(ctl, "REPORT %d %d", st, intact_now && mt_all_bytes(rb, RLEN, MARK));
    }
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_conn_cfg_delete(&with_srq));
    CHECK_OK(rpma_srq_delete(&srq));
    CHECK_OK(rpma_srq_cfg_delete(&srq_cfg));
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_peer_delete(&peer));
    free(rb);
}

int main(int argc, char *argv[]) {
    const char *variant;
    mt_init(argc, argv, &g_port, &variant);
    int ctl = -1;
    int pid = mt_spawn(server, NULL, &ctl);
    char msg[MT_MSG];
    mt_expect(ctl, "READY", msg, 20000);

    struct rpma_peer *peer = it_peer_new(MT_ADDR, false);
    char *sb = it_alloc(MSG);
    it_fill(sb, MSG, 0x5e4d);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, sb, MSG, RPMA_MR_USAGE_SEND, &mr));
    struct rpma_conn_cfg *cfg = mt_cfg(8);
    int failures = 0;
    static const char *const how[3] = {"rpma_conn_req_recv", "rpma_recv", "rpma_srq_recv"};
    for (int round = 0; round < 3; round++) {
        struct rpma_conn *conn = it_connect(peer, MT_ADDR, g_port, cfg, NULL, 0);
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conn, &cq));
        mt_expect(ctl, "GO", msg, 15000);
        CHECK_OK(rpma_send(conn, mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_SEND));
        struct ibv_wc wc;
        mt_cq_get(cq, &wc, 15000, NULL);
        CHECK_EQ(wc.wr_id, WR_SEND);
        enum ibv_wc_status sst = wc.status;
        mt_say(ctl, "DONE");
        enum rpma_conn_event ev = mt_close(&conn, 15000);
        int rst = -1, intact = 0;
        const char *rep = mt_expect(ctl, "REPORT", msg, 30000);
        if (sscanf(rep, "%d %d", &rst, &intact) != 2) IT_FAIL("bad report '%s'", rep);
        printf(
            "round %d (receive posted with %s, then deregistered): send %s, receive %s, "
            "buffer %s, connection %s\n",
            round, how[round], mt_st(sst),
            rst < 0 ? "not completed" : mt_st((enum ibv_wc_status)rst),
            intact ? "untouched" : "CHANGED", rpma_utils_conn_event_2str(ev));
        if (sst != IBV_WC_REM_OP_ERR) {
            printf("FAIL round %d: the send completed %s, expected REM_OP_ERR\n", round,
                   mt_st(sst));
            failures++;
        }
        if (rst < 0 || !mt_is_local_prot((enum ibv_wc_status)rst)) {
            printf("FAIL round %d: the receive %s, expected LOC_PROT_ERR\n", round,
                   rst < 0 ? "did not complete" : mt_st((enum ibv_wc_status)rst));
            failures++;
        }
        if (!intact) {
            printf("FAIL round %d: the deregistered receive buffer was written\n", round);
            failures++;
        }
    }
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(sb);
    mt_reap(pid, 10000);
    if (failures) IT_FAIL("%d check(s) failed", failures);
    printf("PASS\n");
    return 0;
}
