/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 09-flush-to-persistent-by-messaging/server.c -- exposes memory (a file mapped with MAP_SHARED,
 * or DRAM when no file is given) for remote writes, without offering remote flushes. Instead the
 * client asks in a message to persist a range; the server persists it (msync) and replies.
 *
 * usage: server ADDR PORT [FILE]
 */
#include <string.h>

#include "common.h"

#define SIZE 4096

/* the client's request and the server's reply */
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
        fprintf(stderr, "usage: %s ADDR PORT [FILE]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    const char *path = argc > 3 ? argv[3] : NULL;

    struct ex_mem mem;
    ex_mem_map(path, SIZE, &mem);
    memset(mem.ptr, 0, SIZE);
    ex_mem_persist(&mem, 0, SIZE);
    printf("exposing %s\n", path ? path : "DRAM (no file given: persisting is a no-op)");

    struct rpma_peer *peer = ex_peer_new(addr, true);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, mem.ptr, SIZE, RPMA_MR_USAGE_WRITE_DST, &mr));
    struct persist_request *request = ex_malloc(sizeof(*request));
    struct persist_reply *reply = ex_malloc(sizeof(*reply));
    struct rpma_mr_local *request_mr = NULL, *reply_mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, request, sizeof(*request), RPMA_MR_USAGE_RECV, &request_mr));
    EX_CHECK(rpma_mr_reg(peer, reply, sizeof(*reply), RPMA_MR_USAGE_SEND, &reply_mr));
    size_t desc_size = 0;
    EX_CHECK(rpma_mr_get_descriptor_size(mr, &desc_size));
    char desc[64];
    EX_ASSERT(desc_size <= sizeof(desc));
    EX_CHECK(rpma_mr_get_descriptor(mr, desc));

    struct rpma_ep *ep = ex_listen(peer, addr, port);
    struct rpma_conn_req *req = ex_next_conn_req(ep, NULL);
    /* the request may come right after the connection is set up: be ready for it */
    EX_CHECK(rpma_conn_req_recv(req, request_mr, 0, sizeof(*request), NULL));
    struct rpma_conn *conn = ex_accept(&req, desc, desc_size);
    struct rpma_cq *cq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));
    printf("client connected\n");

    struct ibv_wc wc;
    ex_cq_expect(cq, IBV_WC_RECV, NULL, &wc);
    if (wc.byte_len != sizeof(*request)) EX_FAIL("a request of %u bytes", wc.byte_len);
    uint64_t off = request->offset, len = request->length;
    printf("asked to persist [%llu, %llu)\n", (unsigned long long)off,
           (unsigned long long)(off + len));
    if (off <= SIZE && len <= SIZE - off) {
        /* the writes before the request are already placed: operations execute in order */
        ex_mem_persist(&mem, off, len);
        printf("persisted: \"%.*s\"\n", (int)len, (char *)mem.ptr + off);
        reply->status = 0;
    } else {
        printf("the range is outside the memory\n");
        reply->status = -1;
    }
    EX_CHECK(rpma_send(conn, reply_mr, 0, sizeof(*reply), RPMA_F_COMPLETION_ALWAYS, NULL));
    ex_cq_expect(cq, IBV_WC_SEND, NULL, NULL);

    ex_wait_closed(&conn);
    printf("client disconnected\n");
    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_mr_dereg(&request_mr));
    EX_CHECK(rpma_mr_dereg(&reply_mr));
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_peer_delete(&peer));
    int status = reply->status;
    free(request);
    free(reply);
    ex_mem_unmap(&mem);
    return status == 0 ? 0 : 1;
}
