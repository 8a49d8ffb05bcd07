/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 01-connection/client.c -- connects with private data, prints the server's private data and
 * disconnects
 *
 * usage: client ADDR PORT
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

    struct rpma_peer *peer = ex_peer_new(addr, false);

    /* at most 56 bytes travel with a connection request */
    const char *hello = "Hello server! This is the client.";
    struct rpma_conn *conn = ex_connect(peer, addr, port, NULL, hello, strlen(hello) + 1);
    printf("connected to %s:%s, sent \"%s\"\n", addr, port, hello);

    /* the server's private data is known once the connection is established */
    struct rpma_conn_private_data pd = {0};
    EX_CHECK(rpma_conn_get_private_data(conn, &pd));
    if (pd.len == 0) EX_FAIL("the server sent no private data");
    printf("the server answered (%u bytes): \"%.*s\"\n", pd.len, (int)pd.len, (const char *)pd.ptr);

    ex_disconnect(&conn);
    printf("disconnected\n");
    EX_CHECK(rpma_peer_delete(&peer));
    return 0;
}
