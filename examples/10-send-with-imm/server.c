/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 10-send-with-imm/server.c -- receives a message that carries immediate data: the completion
 * has IBV_WC_WITH_IMM set and the value in wc.imm_data, in network byte order. The message itself
 * holds the same value as text, to check against.
 *
 * usage: server ADDR PORT
 */
#include <arpa/inet.h>
#include <string.h>

#include "common.h"

#define MSG 64

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];

    struct rpma_peer *peer = ex_peer_new(addr, true);
    char *msg = ex_malloc(MSG);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, msg, MSG, RPMA_MR_USAGE_RECV, &mr));

    struct rpma_ep *ep = ex_listen(peer, addr, port);
    struct rpma_conn_req *req = ex_next_conn_req(ep, NULL);
    EX_CHECK(rpma_conn_req_recv(req, mr, 0, MSG, NULL));
    struct rpma_conn *conn = ex_accept(&req, NULL, 0);
    struct rpma_cq *cq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));
    printf("client connected\n");

    struct ibv_wc wc;
    ex_cq_expect(cq, IBV_WC_RECV, NULL, &wc);
    if (!(wc.wc_flags & IBV_WC_WITH_IMM)) EX_FAIL("the message carries no immediate data");
    uint32_t imm = ntohl(wc.imm_data);
    msg[MSG - 1] = '\0';
    printf("received %u bytes \"%.*s\" with immediate data %u\n", wc.byte_len, (int)wc.byte_len,
           msg, imm);
    if (strtoul(msg, NULL, 10) != imm) EX_FAIL("the immediate data differs from the message");

    ex_wait_closed(&conn);
    printf("client disconnected\n");
    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(msg);
    return 0;
}
