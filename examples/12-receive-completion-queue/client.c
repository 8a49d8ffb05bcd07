/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 12-receive-completion-queue/client.c -- sends numbers and receives the server's answers
 * (each doubled) through a connection with a separate receive CQ (RCQ)
 *
 *   separate - each CQ is waited for on its own fd (rpma_cq_wait)
 *   shared   - one completion channel serves both (rpma_conn_cfg_set_compl_channel);
 *              rpma_conn_wait wakes up on either and says which one fired
 *
 * usage: client ADDR PORT [separate|shared [ROUNDS]]
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
        fprintf(stderr, "usage: %s ADDR PORT [separate|shared [ROUNDS]]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    bool shared = argc > 3 && strcmp(argv[3], "shared") == 0;
    uint32_t rounds = argc > 4 ? (uint32_t)strtoul(argv[4], NULL, 0) : 5;
    if (rounds == 0) EX_FAIL("ROUNDS must be positive");

    struct rpma_peer *peer = ex_peer_new(addr, false);
    uint64_t *out = ex_malloc(MSG), *in = ex_malloc(MSG);
    struct rpma_mr_local *out_mr = NULL, *in_mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, out, MSG, RPMA_MR_USAGE_SEND, &out_mr));
    EX_CHECK(rpma_mr_reg(peer, in, MSG, RPMA_MR_USAGE_RECV, &in_mr));

    struct rpma_conn_cfg *cfg = NULL;
    EX_CHECK(rpma_conn_cfg_new(&cfg));
    EX_CHECK(rpma_conn_cfg_set_rcq_size(cfg, 10));
    EX_CHECK(rpma_conn_cfg_set_compl_channel(cfg, shared));
    struct rpma_conn *conn = ex_connect(peer, addr, port, cfg, &rounds, sizeof(rounds));
    struct rpma_cq *cq = NULL, *rcq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));
    EX_CHECK(rpma_conn_get_rcq(conn, &rcq));
    EX_ASSERT(rcq != NULL);
    printf("connected; %s\n",
           shared ? "one shared completion channel" : "the CQ and RCQ each with its own channel");

    uint64_t value = 1;
    for (uint32_t r = 0; r < rounds; r++) {
        EX_CHECK(rpma_recv(conn, in_mr, 0, MSG, NULL));
        *out = value;
        EX_CHECK(rpma_send(conn, out_mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, NULL));
        struct ibv_wc wc;
        next_completion(conn, shared, cq, &wc);
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND)
            EX_FAIL("unexpected completion on the CQ: status %d, opcode %d", (int)wc.status,
                    (int)wc.opcode);
        next_completion(conn, shared, rcq, &wc);
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.byte_len != MSG)
            EX_FAIL("unexpected completion on the RCQ: status %d, opcode %d", (int)wc.status,
                    (int)wc.opcode);
        printf("sent %llu, received %llu from the RCQ\n", (unsigned long long)value,
               (unsigned long long)*in);
        if (*in != 2 * value) EX_FAIL("expected %llu", (unsigned long long)(2 * value));
        value = *in + 1;
    }

    ex_disconnect(&conn);
    EX_CHECK(rpma_conn_cfg_delete(&cfg));
    EX_CHECK(rpma_mr_dereg(&out_mr));
    EX_CHECK(rpma_mr_dereg(&in_mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(out);
    free(in);
    return 0;
}
