/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 08-messages-ping-pong/server.c -- answers each ping (a number, rpma_recv) with a pong (the
 * number plus one, rpma_send). The client says in its private data how many rounds it plays.
 *
 * Modes say where the receives are posted and where their completions come:
 *   plain        - the connection's own receive queue; completions on the connection's CQ
 *   srq-rcq      - a shared receive queue (SRQ) with its own receive CQ: completions there
 *   srq-cq       - an SRQ without a receive CQ, connection without one: on the connection's CQ
 *   srq-conn-rcq - an SRQ without a receive CQ, connection with one: on the connection's RCQ
 *
 * usage: server ADDR PORT [plain|srq-rcq|srq-cq|srq-conn-rcq]
 */
#include <string.h>

#include "common.h"

#define MSG sizeof(uint64_t)

enum mode { PLAIN, SRQ_RCQ, SRQ_CQ, SRQ_CONN_RCQ };
static const char *const mode_names[] = {"plain", "srq-rcq", "srq-cq", "srq-conn-rcq"};

int main(int argc, char *argv[]) {
    ex_start();
    int mode = argc > 3 ? -1 : PLAIN;
    for (int m = 0; argc > 3 && m < 4; m++)
        if (strcmp(argv[3], mode_names[m]) == 0) mode = m;
    if (argc < 3 || mode < 0) {
        fprintf(stderr, "usage: %s ADDR PORT [plain|srq-rcq|srq-cq|srq-conn-rcq]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];

    struct rpma_peer *peer = ex_peer_new(addr, true);
    uint64_t *ping = ex_malloc(MSG), *pong = ex_malloc(MSG);
    struct rpma_mr_local *ping_mr = NULL, *pong_mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, ping, MSG, RPMA_MR_USAGE_RECV, &ping_mr));
    EX_CHECK(rpma_mr_reg(peer, pong, MSG, RPMA_MR_USAGE_SEND, &pong_mr));

    struct rpma_conn_cfg *cfg = NULL;
    EX_CHECK(rpma_conn_cfg_new(&cfg));
    struct rpma_srq_cfg *srq_cfg = NULL;
    struct rpma_srq *srq = NULL;
    if (mode != PLAIN) {
        EX_CHECK(rpma_srq_cfg_new(&srq_cfg));
        /* an SRQ gets its own receive CQ unless its size is 0 */
        if (mode != SRQ_RCQ) EX_CHECK(rpma_srq_cfg_set_rcq_size(srq_cfg, 0));
        EX_CHECK(rpma_srq_new(peer, srq_cfg, &srq));
        EX_CHECK(rpma_conn_cfg_set_srq(cfg, srq));
        if (mode == SRQ_CONN_RCQ) EX_CHECK(rpma_conn_cfg_set_rcq_size(cfg, 10));
    }

    struct rpma_ep *ep = ex_listen(peer, addr, port);
    struct rpma_conn_req *req = ex_next_conn_req(ep, cfg);
    struct rpma_conn_private_data pd = {0};
    EX_CHECK(rpma_conn_req_get_private_data(req, &pd));
    uint32_t rounds = 0;
    if (pd.len < sizeof(rounds)) EX_FAIL("expected the number of rounds in private data");
    memcpy(&rounds, pd.ptr, sizeof(rounds));

    /* the first ping may arrive as soon as the connection is up: receive it before */
    if (srq)
        EX_CHECK(rpma_srq_recv(srq, ping_mr, 0, MSG, NULL));
    else
        EX_CHECK(rpma_conn_req_recv(req, ping_mr, 0, MSG, NULL));
    struct rpma_conn *conn = ex_accept(&req, NULL, 0);

    struct rpma_cq *cq = NULL, *rcq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));
    if (mode == SRQ_RCQ)
        EX_CHECK(rpma_srq_get_rcq(srq, &rcq));
    else if (mode == SRQ_CONN_RCQ)
        EX_CHECK(rpma_conn_get_rcq(conn, &rcq));
    else
        rcq = cq;
    EX_ASSERT(rcq != NULL);
    printf("client connected for %u rounds; mode %s: receive completions come on %s\n", rounds,
           mode_names[mode],
           mode == SRQ_RCQ        ? "the SRQ's receive CQ"
           : mode == SRQ_CONN_RCQ ? "the connection's receive CQ"
                                  : "the connection's CQ, with the send completions");

    uint32_t received = 0, sent = 0;
    while (sent < rounds) {
        /* with two CQs: the pong's completion before the next ping; with one: whatever comes */
        struct rpma_cq *from = (rcq != cq && received > sent) ? cq : rcq;
        struct ibv_wc wc;
        ex_cq_next(from, &wc);
        if (wc.status != IBV_WC_SUCCESS) EX_FAIL("completion status %d", (int)wc.status);
        if (wc.opcode == IBV_WC_SEND) {
            sent++;
            continue;
        }
        if (wc.opcode != IBV_WC_RECV || wc.byte_len != MSG || received == rounds)
            EX_FAIL("unexpected completion: opcode %d, %u bytes", (int)wc.opcode, wc.byte_len);
        received++;
        uint64_t value = *ping;
        /* the receive buffer is free again: post it for the next ping before answering */
        if (received < rounds) {
            if (srq)
                EX_CHECK(rpma_srq_recv(srq, ping_mr, 0, MSG, NULL));
            else
                EX_CHECK(rpma_recv(conn, ping_mr, 0, MSG, NULL));
        }
        *pong = value + 1;
        EX_CHECK(rpma_send(conn, pong_mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, NULL));
        printf("ping %llu -> pong %llu\n", (unsigned long long)value, (unsigned long long)*pong);
    }

    ex_wait_closed(&conn);
    printf("client disconnected after %u rounds\n", rounds);
    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_conn_cfg_delete(&cfg));
    EX_CHECK(rpma_srq_delete(&srq));
    EX_CHECK(rpma_srq_cfg_delete(&srq_cfg));
    EX_CHECK(rpma_mr_dereg(&ping_mr));
    EX_CHECK(rpma_mr_dereg(&pong_mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(ping);
    free(pong);
    return 0;
}
