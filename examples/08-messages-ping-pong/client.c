/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 08-messages-ping-pong/client.c -- sends a number (rpma_send) and receives the server's answer,
 * the number plus one (rpma_recv), for a number of rounds; each round starts from the last pong
 *
 * usage: client ADDR PORT [ROUNDS [FIRST]]
 */
#include <string.h>

#include "common.h"

#define MSG sizeof(uint64_t)

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT [ROUNDS [FIRST]]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    uint32_t rounds = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 0) : 10;
    uint64_t value = argc > 4 ? strtoull(argv[4], NULL, 0) : 0;
    if (rounds == 0) EX_FAIL("ROUNDS must be positive");

    struct rpma_peer *peer = ex_peer_new(addr, false);
    uint64_t *ping = ex_malloc(MSG), *pong = ex_malloc(MSG);
    struct rpma_mr_local *ping_mr = NULL, *pong_mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, ping, MSG, RPMA_MR_USAGE_SEND, &ping_mr));
    EX_CHECK(rpma_mr_reg(peer, pong, MSG, RPMA_MR_USAGE_RECV, &pong_mr));

    struct rpma_conn *conn = ex_connect(peer, addr, port, NULL, &rounds, sizeof(rounds));
    struct rpma_cq *cq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));
    printf("connected; playing %u rounds\n", rounds);

    for (uint32_t r = 0; r < rounds; r++) {
        EX_CHECK(rpma_recv(conn, pong_mr, 0, MSG, NULL));
        *ping = value;
        EX_CHECK(rpma_send(conn, ping_mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, NULL));

        /* the send's and the receive's completions, in either order */
        bool sent = false, received = false;
        while (!sent || !received) {
            struct ibv_wc wc;
            ex_cq_next(cq, &wc);
            if (wc.status != IBV_WC_SUCCESS) EX_FAIL("completion status %d", (int)wc.status);
            if (wc.opcode == IBV_WC_SEND && !sent)
                sent = true;
            else if (wc.opcode == IBV_WC_RECV && !received && wc.byte_len == MSG)
                received = true;
            else
                EX_FAIL("unexpected completion: opcode %d", (int)wc.opcode);
        }
        printf("ping %llu -> pong %llu\n", (unsigned long long)value, (unsigned long long)*pong);
        if (*pong != value + 1) EX_FAIL("expected pong %llu", (unsigned long long)value + 1);
        value = *pong + 1;
    }

    ex_disconnect(&conn);
    EX_CHECK(rpma_mr_dereg(&ping_mr));
    EX_CHECK(rpma_mr_dereg(&pong_mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(ping);
    free(pong);
    return 0;
}
