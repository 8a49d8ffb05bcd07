/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * local_range.c -- the local range of a post, one connection.
 *
 * An empty range touches no memory, so neither its offset nor its lkey is checked, as a NIC
 * checks no scatter entry of 0 bytes: a write, a read and three sends of 0 bytes from or into
 * offset SIZE + 100 of a registered region (and a write at offset SIZE_MAX) are taken and
 * complete with byte_len 0, as do a read of 0 bytes into a region without local write access and
 * a write of 0 bytes from a region of another peer; three receives of 0 bytes (rpma_conn_req_recv
 * and rpma_recv at offset SIZE + 100, rpma_recv into a region registered READ_SRC only) take the
 * three empty messages. The reference over rxe does all of this.
 *
 * A non-empty range that does not fit in its region is refused when posting (RPMA_E_INVAL)
 * and the connection goes on: every post above still completes (rpma only; the reference posts it
 * and completes it with IBV_WC_LOC_PROT_ERR, the queue pair then in error: docs/testing.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "common.h"

#define SIZE 4096
#define PAST (SIZE + 100) /* an offset past the end of every region here */
#define TARGET 4096

enum {
    OP_WRITE,
    OP_WRITE_MAX,
    OP_READ,
    OP_READ_NO_WRITE,
    OP_WRITE_OTHER_PEER,
    OP_SEND_1,
    OP_SEND_2,
    OP_SEND_3,
    N_OPS
};
#define N_RECVS 3

/* no byte of buf (SIZE bytes, filled with fill) changed */
static void expect_untouched(const char *buf, unsigned char fill, const char *what) {
    for (size_t i = 0; i < SIZE; i++)
        if ((unsigned char)buf[i] != fill) IT_FAIL("%s byte %zu changed", what, i);
}

/* what rpma refuses when posting; the reference would post it */
static void expect_refused(int ret, const char *what) {
    if (ret != RPMA_E_INVAL)
        IT_FAIL("%s: returned %d (%s), expected RPMA_E_INVAL", what, ret, rpma_err_2str(ret));
}

static void server(const struct it_args *a) {
    char *target = it_alloc(TARGET), *rbuf = it_alloc(SIZE);
    memset(rbuf, 0x5a, SIZE);
    struct it_region_server srv;
    it_region_server_open(&srv, a, target, TARGET,
                          RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST);
    struct rpma_mr_local *rmr = NULL, *romr = NULL;
    CHECK_OK(rpma_mr_reg(srv.peer, rbuf, SIZE, RPMA_MR_USAGE_RECV, &rmr));
    CHECK_OK(rpma_mr_reg(srv.peer, rbuf, SIZE, RPMA_MR_USAGE_READ_SRC, &romr));

    struct rpma_conn_req *req = it_next_req(srv.ep, NULL);
    if (!it_reference()) {
        expect_refused(rpma_conn_req_recv(req, rmr, SIZE, 1, NULL), "rpma_conn_req_recv(SIZE, 1)");
        expect_refused(rpma_conn_req_recv(req, rmr, 8, SIZE, NULL), "rpma_conn_req_recv(8, SIZE)");
    }
    CHECK_OK(rpma_conn_req_recv(req, rmr, PAST, 0, (void *)0x61));
    struct rpma_conn *conn = it_accept(&req, srv.desc, sizeof(srv.desc));
    if (!it_reference()) {
        expect_refused(rpma_recv(conn, rmr, SIZE - 8, 16, NULL), "rpma_recv(SIZE - 8, 16)");
        expect_refused(rpma_recv(conn, rmr, SIZE_MAX, 1, NULL), "rpma_recv(SIZE_MAX, 1)");
    }
    CHECK_OK(rpma_recv(conn, rmr, PAST, 0, (void *)0x62));
    CHECK_OK(rpma_recv(conn, romr, 0, 0, (void *)0x63));

    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    for (uintptr_t k = 0; k < N_RECVS; k++)
        it_cq_expect_len(cq, IBV_WC_RECV, (void *)(0x61 + k), 0);
    expect_untouched(rbuf, 0x5a, "receive buffer");
    it_disconnect_passive(&conn, false);
    CHECK_OK(rpma_mr_dereg(&romr));
    CHECK_OK(rpma_mr_dereg(&rmr));
    it_region_server_close(&srv);
    free(target);
    free(rbuf);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *buf = it_alloc(SIZE);
    memset(buf, 0x3c, SIZE);
    struct rpma_mr_local *mr = NULL, *send_only = NULL, *other = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, SIZE,
                         RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_SEND,
                         &mr));
    CHECK_OK(rpma_mr_reg(peer, buf, SIZE, RPMA_MR_USAGE_SEND, &send_only));
    struct rpma_peer *other_peer = it_peer_new(a->addr, false);
    CHECK_OK(rpma_mr_reg(other_peer, buf, SIZE, RPMA_MR_USAGE_WRITE_SRC, &other));
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, N_OPS));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, N_OPS));
    struct rpma_mr_remote *rmr = NULL;
    struct rpma_cq *cq = NULL;
    struct rpma_conn *conn = it_connect_region(peer, a, cfg, NULL, 0, &rmr, &cq);

    const int f = RPMA_F_COMPLETION_ALWAYS;
    if (!it_reference()) {
        expect_refused(rpma_write(conn, rmr, 0, mr, SIZE - 8, 16, f, NULL),
                       "rpma_write(SIZE - 8, 16)");
        expect_refused(rpma_read(conn, mr, SIZE + 1, rmr, 0, 1, f, NULL), "rpma_read(SIZE + 1, 1)");
        expect_refused(rpma_send(conn, mr, SIZE_MAX, 1, f, NULL), "rpma_send(SIZE_MAX, 1)");
        expect_refused(rpma_send(conn, mr, 0, SIZE + 1, f, NULL), "rpma_send(0, SIZE + 1)");
    }
    CHECK_OK(rpma_write(conn, rmr, 0, mr, PAST, 0, f, (void *)(0x100 + OP_WRITE)));
    CHECK_OK(rpma_write(conn, rmr, 0, mr, SIZE_MAX, 0, f, (void *)(0x100 + OP_WRITE_MAX)));
    CHECK_OK(rpma_read(conn, mr, PAST, rmr, 0, 0, f, (void *)(0x100 + OP_READ)));
    CHECK_OK(rpma_read(conn, send_only, 0, rmr, 0, 0, f, (void *)(0x100 + OP_READ_NO_WRITE)));
    CHECK_OK(rpma_write(conn, rmr, 0, other, 0, 0, f, (void *)(0x100 + OP_WRITE_OTHER_PEER)));
    CHECK_OK(rpma_send(conn, mr, PAST, 0, f, (void *)(0x100 + OP_SEND_1)));
    CHECK_OK(rpma_send(conn, mr, PAST, 0, f, (void *)(0x100 + OP_SEND_2)));
    CHECK_OK(rpma_send(conn, mr, PAST, 0, f, (void *)(0x100 + OP_SEND_3)));

    static const enum ibv_wc_opcode opcode[N_OPS] = {
        IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_RDMA_READ,
        IBV_WC_RDMA_WRITE, IBV_WC_SEND,       IBV_WC_SEND,      IBV_WC_SEND};
    for (uintptr_t k = 0; k < N_OPS; k++) it_cq_expect_len(cq, opcode[k], (void *)(0x100 + k), 0);
    it_cq_expect_empty(cq);
    expect_untouched(buf, 0x3c, "local buffer");

    it_disconnect_region(&conn, &rmr);
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&other));
    CHECK_OK(rpma_peer_delete(&other_peer));
    CHECK_OK(rpma_mr_dereg(&send_only));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
