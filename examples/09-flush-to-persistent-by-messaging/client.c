/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 09-flush-to-persistent-by-messaging/client.c -- writes a text into the server's memory, then
 * asks the server in a message to persist that range and waits for its reply
 *
 * usage: client ADDR PORT [TEXT [OFFSET]]
 */
#include <string.h>

#include "common.h"

struct persist_request {
    uint64_t offset;
    uint64_t length;
};
struct persist_reply {
    int32_t status; /* 0: persisted; -1: the range is outside the memory */
};

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT [TEXT [OFFSET]]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    const char *text = argc > 3 ? argv[3] : "Persisted on request.";
    size_t offset = argc > 4 ? strtoull(argv[4], NULL, 0) : 100;
    size_t len = strlen(text);

    struct rpma_peer *peer = ex_peer_new(addr, false);
    char *src = ex_malloc(len + 1);
    memcpy(src, text, len);
    struct persist_request *request = ex_malloc(sizeof(*request));
    struct persist_reply *reply = ex_malloc(sizeof(*reply));
    struct rpma_mr_local *src_mr = NULL, *request_mr = NULL, *reply_mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, src, len + 1, RPMA_MR_USAGE_WRITE_SRC, &src_mr));
    EX_CHECK(rpma_mr_reg(peer, request, sizeof(*request), RPMA_MR_USAGE_SEND, &request_mr));
    EX_CHECK(rpma_mr_reg(peer, reply, sizeof(*reply), RPMA_MR_USAGE_RECV, &reply_mr));

    struct rpma_conn *conn = ex_connect(peer, addr, port, NULL, NULL, 0);
    struct rpma_mr_remote *dst_mr = ex_remote_mr_from_pdata(conn, 0);
    size_t dst_size = 0;
    EX_CHECK(rpma_mr_remote_get_size(dst_mr, &dst_size));
    if (offset > dst_size || len > dst_size - offset)
        EX_FAIL("the text does not fit at offset %zu of %zu bytes", offset, dst_size);
    struct rpma_cq *cq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));

    EX_CHECK(rpma_recv(conn, reply_mr, 0, sizeof(*reply), NULL));
    /* the server handles the request after the write is placed: operations execute in order */
    EX_CHECK(rpma_write(conn, dst_mr, offset, src_mr, 0, len, RPMA_F_COMPLETION_ON_ERROR, NULL));
    request->offset = offset;
    request->length = len;
    EX_CHECK(rpma_send(conn, request_mr, 0, sizeof(*request), RPMA_F_COMPLETION_ALWAYS, NULL));
    printf("wrote \"%s\" at offset %zu and asked the server to persist it\n", text, offset);

    bool sent = false, replied = false;
    while (!sent || !replied) {
        struct ibv_wc wc;
        ex_cq_next(cq, &wc);
        if (wc.status != IBV_WC_SUCCESS) EX_FAIL("completion status %d", (int)wc.status);
        if (wc.opcode == IBV_WC_SEND && !sent)
            sent = true;
        else if (wc.opcode == IBV_WC_RECV && !replied && wc.byte_len == sizeof(*reply))
            replied = true;
        else
            EX_FAIL("unexpected completion: opcode %d", (int)wc.opcode);
    }
    if (reply->status != 0) EX_FAIL("the server could not persist the range: %d", reply->status);
    printf("the server replied: persisted\n");

    EX_CHECK(rpma_mr_remote_delete(&dst_mr));
    ex_disconnect(&conn);
    EX_CHECK(rpma_mr_dereg(&src_mr));
    EX_CHECK(rpma_mr_dereg(&request_mr));
    EX_CHECK(rpma_mr_dereg(&reply_mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(src);
    free(request);
    free(reply);
    return 0;
}
