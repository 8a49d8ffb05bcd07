/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 11-write-with-imm/server.c -- exposes memory for a remote write with immediate data. Such a
 * write also consumes a posted receive, so the server learns that the write has landed: the
 * receive completes with opcode IBV_WC_RECV_RDMA_WITH_IMM, carrying the immediate value (here the
 * number of bytes written) in network byte order.
 *
 * usage: server ADDR PORT
 */
#include <arpa/inet.h>
#include <string.h>

#include "common.h"

#define SIZE 4096

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];

    struct rpma_peer *peer = ex_peer_new(addr, true);
    char *buf = ex_malloc(SIZE);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, buf, SIZE, RPMA_MR_USAGE_WRITE_DST, &mr));
    /* the write's data goes to buf; the receive it consumes gets no data */
    char *unused = ex_malloc(8);
    struct rpma_mr_local *recv_mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, unused, 8, RPMA_MR_USAGE_RECV, &recv_mr));
    size_t desc_size = 0;
    EX_CHECK(rpma_mr_get_descriptor_size(mr, &desc_size));
    char desc[64];
    EX_ASSERT(desc_size <= sizeof(desc));
    EX_CHECK(rpma_mr_get_descriptor(mr, desc));

    struct rpma_ep *ep = ex_listen(peer, addr, port);
    struct rpma_conn_req *req = ex_next_conn_req(ep, NULL);
    EX_CHECK(rpma_conn_req_recv(req, recv_mr, 0, 8, NULL));
    struct rpma_conn *conn = ex_accept(&req, desc, desc_size);
    struct rpma_cq *cq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));
    printf("client connected\n");

    struct ibv_wc wc;
    ex_cq_expect(cq, IBV_WC_RECV_RDMA_WITH_IMM, NULL, &wc);
    if (!(wc.wc_flags & IBV_WC_WITH_IMM)) EX_FAIL("the completion carries no immediate data");
    uint32_t len = ntohl(wc.imm_data);
    if (len == 0 || len > SIZE) EX_FAIL("immediate data %u is no valid length", len);
    printf("a write with immediate data %u landed: \"%.*s\"\n", len, (int)len, buf);
    if (strnlen(buf, len) != len) EX_FAIL("fewer than %u bytes were written", len);

    ex_wait_closed(&conn);
    printf("client disconnected\n");
    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_mr_dereg(&recv_mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(buf);
    free(unused);
    return 0;
}
