/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 02-read-to-volatile/server.c -- exposes a buffer holding a text for remote reads; its
 * descriptor travels to the client in the private data of the connection
 *
 * usage: server ADDR PORT
 */
#include <string.h>

#include "common.h"

#define SIZE 4096
#define TEXT "The quick brown fox jumps over the lazy dog."

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];

    struct rpma_peer *peer = ex_peer_new(addr, true);
    char *buf = ex_malloc(SIZE);
    strcpy(buf, TEXT);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, buf, SIZE, RPMA_MR_USAGE_READ_SRC, &mr));

    /* the descriptor tells the client where the buffer is and how to access it */
    size_t desc_size = 0;
    EX_CHECK(rpma_mr_get_descriptor_size(mr, &desc_size));
    char desc[64];
    EX_ASSERT(desc_size <= sizeof(desc));
    EX_CHECK(rpma_mr_get_descriptor(mr, desc));

    struct rpma_ep *ep = ex_listen(peer, addr, port);
    struct rpma_conn_req *req = ex_next_conn_req(ep, NULL);
    struct rpma_conn *conn = ex_accept(&req, desc, desc_size);
    printf("client connected; exposing \"%s\" (%zu-byte descriptor sent)\n", buf, desc_size);

    /* the reads need nothing from this side: wait until the client is done */
    ex_wait_closed(&conn);
    printf("client disconnected\n");

    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(buf);
    return 0;
}
