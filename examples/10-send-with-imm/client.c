/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 10-send-with-imm/client.c -- sends a message with immediate data (rpma_send_with_imm); the
 * message holds the same value as text
 *
 * usage: client ADDR PORT [IMM]
 */
#include <string.h>

#include "common.h"

#define MSG 64

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT [IMM]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    uint32_t imm = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 0) : 0xc0ffee;

    struct rpma_peer *peer = ex_peer_new(addr, false);
    char *msg = ex_malloc(MSG);
    int len = snprintf(msg, MSG, "%u", imm);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, msg, MSG, RPMA_MR_USAGE_SEND, &mr));
    struct rpma_conn *conn = ex_connect(peer, addr, port, NULL, NULL, 0);
    struct rpma_cq *cq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));

    /* the value is given in host byte order; the receiver gets it in network byte order */
    EX_CHECK(rpma_send_with_imm(conn, mr, 0, (size_t)len, RPMA_F_COMPLETION_ALWAYS, imm, NULL));
    ex_cq_expect(cq, IBV_WC_SEND, NULL, NULL);
    printf("sent \"%s\" with immediate data %u\n", msg, imm);

    ex_disconnect(&conn);
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(msg);
    return 0;
}
