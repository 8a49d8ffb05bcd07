/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 01-connection/server.c -- accepts one connection, prints the client's private data and answers
 * with private data of its own
 *
 * usage: server ADDR PORT
 */
#include <string.h>

#include "common.h"

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];

    struct rpma_peer *peer = ex_peer_new(addr, true);
    struct rpma_ep *ep = ex_listen(peer, addr, port);

    /* the client's private data arrives with its request, before the connection exists */
    struct rpma_conn_req *req = ex_next_conn_req(ep, NULL);
    struct rpma_conn_private_data pd = {0};
    EX_CHECK(rpma_conn_req_get_private_data(req, &pd));
    if (pd.len == 0) EX_FAIL("the client sent no private data");
    printf("connection request with private data (%u bytes): \"%.*s\"\n", pd.len, (int)pd.len,
           (const char *)pd.ptr);

    const char *answer = "Hello client! This is the server.";
    struct rpma_conn *conn = ex_accept(&req, answer, strlen(answer) + 1);
    printf("connection established, answered with \"%s\"\n", answer);

    /* the client ends the connection */
    ex_wait_closed(&conn);
    printf("connection closed by the client\n");

    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_peer_delete(&peer));
    return 0;
}
