/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 03-read-to-persistent/server.c -- exposes a text for remote reads; its descriptor travels to
 * the client in the private data of the connection
 *
 * usage: server ADDR PORT [TEXT]
 */
#include <string.h>

#include "common.h"

#define SIZE 4096

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT [TEXT]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    const char *text = argc > 3 ? argv[3] : "Hello from the server, kept in persistent memory.";
    if (strlen(text) >= SIZE) EX_FAIL("the text is longer than %d bytes", SIZE - 1);

    struct rpma_peer *peer = ex_peer_new(addr, true);
    char *buf = ex_malloc(SIZE);
    strcpy(buf, text);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, buf, SIZE, RPMA_MR_USAGE_READ_SRC, &mr));
    size_t desc_size = 0;
    EX_CHECK(rpma_mr_get_descriptor_size(mr, &desc_size));
    char desc[64];
    EX_ASSERT(desc_size <= sizeof(desc));
    EX_CHECK(rpma_mr_get_descriptor(mr, desc));

    struct rpma_ep *ep = ex_listen(peer, addr, port);
    struct rpma_conn_req *req = ex_next_conn_req(ep, NULL);
    struct rpma_conn *conn = ex_accept(&req, desc, desc_size);
    printf("client connected; it may read \"%s\"\n", buf);

    ex_wait_closed(&conn);
    printf("client disconnected\n");

    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(buf);
    return 0;
}
