/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 13-srq-three-clients/server.c -- three clients share one receive queue (SRQ): the server posts
 * receives once, to the SRQ, and every client's messages land in them. All receive completions
 * come on the SRQ's receive CQ; wc.qp_num tells which connection (rpma_conn_get_qp_num) a message
 * came through.
 *
 * usage: server ADDR PORT [CLIENTS]
 */
#include <string.h>

#include "common.h"

#define MAX_CLIENTS 8
#define MSG 32
#define BUFS 16 /* receives kept posted */

/* what a client says in the private data of its request */
struct hello {
    uint8_t id;
    uint8_t messages;
};

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT [CLIENTS]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    int clients = argc > 3 ? atoi(argv[3]) : 3;
    if (clients < 1 || clients > MAX_CLIENTS) EX_FAIL("CLIENTS must be within 1..%d", MAX_CLIENTS);

    struct rpma_peer *peer = ex_peer_new(addr, true);
    char *bufs = ex_malloc(BUFS * MSG);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, bufs, BUFS * MSG, RPMA_MR_USAGE_RECV, &mr));

    /* the SRQ gets its own receive CQ (rcq size 100 unless set otherwise) */
    struct rpma_srq_cfg *srq_cfg = NULL;
    EX_CHECK(rpma_srq_cfg_new(&srq_cfg));
    struct rpma_srq *srq = NULL;
    EX_CHECK(rpma_srq_new(peer, srq_cfg, &srq));
    struct rpma_cq *rcq = NULL;
    EX_CHECK(rpma_srq_get_rcq(srq, &rcq));
    EX_ASSERT(rcq != NULL);
    /* op_context names the buffer */
    for (uintptr_t b = 0; b < BUFS; b++) EX_CHECK(rpma_srq_recv(srq, mr, b * MSG, MSG, (void *)b));

    struct rpma_conn_cfg *cfg = NULL;
    EX_CHECK(rpma_conn_cfg_new(&cfg));
    EX_CHECK(rpma_conn_cfg_set_srq(cfg, srq));

    struct rpma_ep *ep = ex_listen(peer, addr, port);
    struct rpma_conn *conn[MAX_CLIENTS];
    uint32_t qp_num[MAX_CLIENTS];
    struct hello hello[MAX_CLIENTS];
    int total = 0;
    for (int c = 0; c < clients; c++) {
        struct rpma_conn_req *req = ex_next_conn_req(ep, cfg);
        struct rpma_conn_private_data pd = {0};
        EX_CHECK(rpma_conn_req_get_private_data(req, &pd));
        if (pd.len < sizeof(struct hello)) EX_FAIL("a request without the client's hello");
        memcpy(&hello[c], pd.ptr, sizeof(struct hello));
        conn[c] = ex_accept(&req, NULL, 0);
        EX_CHECK(rpma_conn_get_qp_num(conn[c], &qp_num[c]));
        total += hello[c].messages;
        printf("client %u connected through qp %u; it sends %u messages\n", hello[c].id, qp_num[c],
               hello[c].messages);
    }

    int got[MAX_CLIENTS] = {0};
    for (int m = 0; m < total; m++) {
        struct ibv_wc wc;
        ex_cq_next(rcq, &wc);
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV)
            EX_FAIL("unexpected completion: status %d, opcode %d", (int)wc.status, (int)wc.opcode);
        int c = 0;
        while (c < clients && qp_num[c] != wc.qp_num) c++;
        if (c == clients) EX_FAIL("a message through qp %u, which is no connection", wc.qp_num);
        if (wc.wr_id >= BUFS)
            EX_FAIL("a completion for no buffer: %llu", (unsigned long long)wc.wr_id);
        char *msg = bufs + wc.wr_id * MSG;
        msg[MSG - 1] = '\0';
        printf("qp %u (client %u): \"%s\"\n", wc.qp_num, hello[c].id, msg);
        /* each client names itself in its messages: they must agree with qp_num */
        char expect[MSG];
        int n = snprintf(expect, sizeof(expect), "client %u,", hello[c].id);
        if (strncmp(msg, expect, (size_t)n) != 0)
            EX_FAIL("the message is not from client %u", hello[c].id);
        got[c]++;
        EX_CHECK(rpma_srq_recv(srq, mr, wc.wr_id * MSG, MSG, (void *)(uintptr_t)wc.wr_id));
    }
    for (int c = 0; c < clients; c++) {
        if (got[c] != hello[c].messages)
            EX_FAIL("client %u: %d messages, expected %u", hello[c].id, got[c], hello[c].messages);
        ex_wait_closed(&conn[c]);
    }
    printf("all %d clients disconnected after %d messages\n", clients, total);

    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_conn_cfg_delete(&cfg));
    EX_CHECK(rpma_srq_delete(&srq));
    EX_CHECK(rpma_srq_cfg_delete(&srq_cfg));
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(bufs);
    return 0;
}
