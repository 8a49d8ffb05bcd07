/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 12-receive-completion-queue/server.c -- a connection with a separate receive CQ (RCQ): receive
 * completions come there, send completions on the CQ. The server answers each number it
 * receives with the number doubled.
 *
 *   separate - each CQ is waited for on its own fd (rpma_cq_wait)
 *   shared   - one completion channel serves both (rpma_conn_cfg_set_compl_channel);
 *              rpma_conn_wait wakes up on either and says which one fired
 *
 * usage: server ADDR PORT [separate|shared]
 */
#include <string.h>

#include "common.h"

#define MSG sizeof(uint64_t)

/* the next completion from want: the CQ or the RCQ of the connection */
static void next_completion(struct rpma_conn *conn, bool shared, struct rpma_cq *want,
                            struct ibv_wc *wc) {
    if (!shared) {
        ex_cq_next(want, wc);
        return;
    }
    int fd = -1;
    EX_CHECK(rpma_conn_get_compl_fd(conn, &fd));
    for (;;) {
        /* the other CQ's completions stay there until asked for */
        int ret = rpma_cq_get_wc(want, 1, wc, NULL);
        if (ret == 0) return;
        if (ret != RPMA_E_NO_COMPLETION) EX_CHECK(ret);
        if (!ex_poll_fd(fd, EX_WAIT_MS)) EX_FAIL("no completion within %d ms", EX_WAIT_MS);
        struct rpma_cq *fired = NULL;
        bool is_rcq = false;
        EX_CHECK(rpma_conn_wait(conn, 0, &fired, &is_rcq));
        printf("  rpma_conn_wait: the %s fired\n", is_rcq ? "RCQ" : "CQ");
    }
}

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3 ||
        (argc > 3 && strcmp(argv[3], "separate") != 0 && strcmp(argv[3], "shared") != 0)) {
        fprintf(stderr, "usage: %s ADDR PORT [separate|shared]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    bool shared = argc > 3 && strcmp(argv[3], "shared") == 0;

    struct rpma_peer *peer = ex_peer_new(addr, true);
    uint64_t *in = ex_malloc(MSG), *out = ex_malloc(MSG);
    struct rpma_mr_local *in_mr = NULL, *out_mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, in, MSG, RPMA_MR_USAGE_RECV, &in_mr));
    EX_CHECK(rpma_mr_reg(peer, out, MSG, RPMA_MR_USAGE_SEND, &out_mr));

    /* an RCQ exists only when its size is set */
    struct rpma_conn_cfg *cfg = NULL;
    EX_CHECK(rpma_conn_cfg_new(&cfg));
    EX_CHECK(rpma_conn_cfg_set_rcq_size(cfg, 10));
    EX_CHECK(rpma_conn_cfg_set_compl_channel(cfg, shared));

    struct rpma_ep *ep = ex_listen(peer, addr, port);
    struct rpma_conn_req *req = ex_next_conn_req(ep, cfg);
    struct rpma_conn_private_data pd = {0};
    EX_CHECK(rpma_conn_req_get_private_data(req, &pd));
    uint32_t rounds = 0;
    if (pd.len < sizeof(rounds)) EX_FAIL("expected the number of rounds in private data");
    memcpy(&rounds, pd.ptr, sizeof(rounds));
    EX_CHECK(rpma_conn_req_recv(req, in_mr, 0, MSG, NULL));
    struct rpma_conn *conn = ex_accept(&req, NULL, 0);
    struct rpma_cq *cq = NULL, *rcq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));
    EX_CHECK(rpma_conn_get_rcq(conn, &rcq));
    EX_ASSERT(rcq != NULL);
    printf("client connected for %u rounds; %s\n", rounds,
           shared ? "one shared completion channel" : "the CQ and RCQ each with its own channel");

    for (uint32_t r = 0; r < rounds; r++) {
        struct ibv_wc wc;
        next_completion(conn, shared, rcq, &wc);
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.byte_len != MSG)
            EX_FAIL("unexpected completion on the RCQ: status %d, opcode %d", (int)wc.status,
                    (int)wc.opcode);
        uint64_t value = *in;
        if (r + 1 < rounds) EX_CHECK(rpma_recv(conn, in_mr, 0, MSG, NULL));
        *out = 2 * value;
        EX_CHECK(rpma_send(conn, out_mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, NULL));
        printf("received %llu from the RCQ, answered %llu\n", (unsigned long long)value,
               (unsigned long long)*out);
        next_completion(conn, shared, cq, &wc);
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND)
            EX_FAIL("unexpected completion on the CQ: status %d, opcode %d", (int)wc.status,
                    (int)wc.opcode);
    }

    ex_wait_closed(&conn);
    printf("client disconnected\n");
    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_conn_cfg_delete(&cfg));
    EX_CHECK(rpma_mr_dereg(&in_mr));
    EX_CHECK(rpma_mr_dereg(&out_mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(in);
    free(out);
    return 0;
}
