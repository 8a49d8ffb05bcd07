/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 06-multiple-connections/client.c -- opens N connections at once. Each exposes a hello for the
 * server to read (its descriptor goes in the request's private data) and receives the server's
 * answer. Connections stay open until every one of them is either established or rejected, so
 * with more connections than the server has slots the extra ones are rejected.
 *
 * usage: client ADDR PORT [N [EXPECTED_REJECTED]]
 */
#include <string.h>

#include "common.h"

#define MAX_CONNS 64
#define MSG 64

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT [N [EXPECTED_REJECTED]]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    int n = argc > 3 ? atoi(argv[3]) : 1;
    int expected_rejected = argc > 4 ? atoi(argv[4]) : -1;
    if (n < 1 || n > MAX_CONNS) EX_FAIL("N must be within 1..%d", MAX_CONNS);

    struct rpma_peer *peer = ex_peer_new(addr, false);
    /* per connection: MSG bytes of hello for the server to read, MSG bytes for its answer */
    char *buf = ex_malloc((size_t)n * 2 * MSG);
    struct rpma_mr_local *mr[MAX_CONNS];
    struct rpma_conn *conn[MAX_CONNS];

    /* start every connection before waiting for any */
    for (int i = 0; i < n; i++) {
        char *hello = buf + (size_t)i * 2 * MSG;
        snprintf(hello, MSG, "hello from connection %d", i);
        EX_CHECK(
            rpma_mr_reg(peer, hello, 2 * MSG, RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_RECV, &mr[i]));
        char desc[64];
        size_t desc_size = 0;
        EX_CHECK(rpma_mr_get_descriptor_size(mr[i], &desc_size));
        EX_ASSERT(desc_size <= sizeof(desc));
        EX_CHECK(rpma_mr_get_descriptor(mr[i], desc));

        struct rpma_conn_req *req = NULL;
        EX_CHECK(rpma_conn_req_new(peer, addr, port, NULL, &req));
        /* the answer may come right after the connection is set up: be ready for it */
        EX_CHECK(rpma_conn_req_recv(req, mr[i], MSG, MSG, NULL));
        struct rpma_conn_private_data pd = {.ptr = desc, .len = (uint8_t)desc_size};
        EX_CHECK(rpma_conn_req_connect(&req, &pd, &conn[i]));
    }

    int established = 0, rejected = 0;
    for (int i = 0; i < n; i++) {
        enum rpma_conn_event ev = ex_next_event(conn[i]);
        printf("connection %d: %s\n", i, rpma_utils_conn_event_2str(ev));
        if (ev == RPMA_CONN_ESTABLISHED) {
            established++;
        } else if (ev == RPMA_CONN_REJECTED) {
            rejected++;
            EX_CHECK(rpma_conn_delete(&conn[i]));
        } else {
            EX_FAIL("connection %d: unexpected event", i);
        }
    }

    for (int i = 0; i < n; i++) {
        if (conn[i] == NULL) continue;
        struct rpma_cq *cq = NULL;
        EX_CHECK(rpma_conn_get_cq(conn[i], &cq));
        ex_cq_expect(cq, IBV_WC_RECV, NULL, NULL);
        char *answer = buf + (size_t)i * 2 * MSG + MSG;
        answer[MSG - 1] = '\0';
        printf("connection %d: the server answered \"%s\"\n", i, answer);
    }
    for (int i = 0; i < n; i++)
        if (conn[i] != NULL) ex_disconnect(&conn[i]);

    printf("%d established, %d rejected\n", established, rejected);
    if (expected_rejected >= 0 && rejected != expected_rejected)
        EX_FAIL("expected %d rejected connections", expected_rejected);

    for (int i = 0; i < n; i++) EX_CHECK(rpma_mr_dereg(&mr[i]));
    EX_CHECK(rpma_peer_delete(&peer));
    free(buf);
    return 0;
}
