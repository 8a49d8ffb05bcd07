/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * srq_delete.c -- an SRQ cannot be deleted while a connection, or a connection request made with
 * it in its cfg, still uses it: rpma_srq_delete returns RPMA_E_PROVIDER (ibv_destroy_srq fails
 * with EBUSY), keeps *srq_ptr, and the connection goes on receiving through it. Once the request
 * is rejected or the connection deleted, the delete works.
 *
 * Server: a request made with srq2 is refused deletion of srq2, rejected, then srq2 deletes; a
 * connection made with srq is refused deletion of srq, then receives MSGS messages through it;
 * after CLOSED and rpma_conn_delete, srq deletes. Client: one rejected attempt, one connection
 * that sends MSGS messages. Run it under ASan too: the old library freed the SRQ. On the
 * reference only the order RDMA allows runs: no delete while the SRQ is in use.
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "common.h"

#define MSGS 8
#define MSG 64

static struct rpma_srq *srq_new(struct rpma_peer *peer) {
    struct rpma_srq_cfg *scfg = NULL;
    CHECK_OK(rpma_srq_cfg_new(&scfg));
    CHECK_OK(rpma_srq_cfg_set_rq_size(scfg, MSGS));
    CHECK_OK(rpma_srq_cfg_set_rcq_size(scfg, MSGS));
    struct rpma_srq *srq = NULL;
    CHECK_OK(rpma_srq_new(peer, scfg, &srq));
    CHECK_OK(rpma_srq_cfg_delete(&scfg));
    return srq;
}

static struct rpma_conn_cfg *cfg_with(struct rpma_srq *srq) {
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_srq(cfg, srq));
    return cfg;
}

/* the delete must be refused and leave the handle as it was. Not on the reference: RDMA refuses
 * it too (EBUSY), but upstream then frees the SRQ object anyway (its man page clears *srq_ptr on
 * failure), so nothing could use or delete the SRQ afterwards; rpma keeps it on purpose
 * (docs/tcp-provider.md) */
static void expect_busy(struct rpma_srq **srq, const char *when) {
    if (it_reference()) return;
    struct rpma_srq *before = *srq;
    int ret = rpma_srq_delete(srq);
    if (ret != RPMA_E_PROVIDER)
        IT_FAIL("rpma_srq_delete %s returned %d (%s), expected RPMA_E_PROVIDER", when, ret,
                rpma_err_2str(ret));
    CHECK(*srq == before);
    printf("srq_delete %s: RPMA_E_PROVIDER, handle kept\n", when);
}

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *rbuf = it_alloc(MSGS * MSG);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, rbuf, MSGS * MSG, RPMA_MR_USAGE_RECV, &mr));
    struct rpma_srq *srq = srq_new(peer), *srq2 = srq_new(peer);
    struct rpma_conn_cfg *cfg = cfg_with(srq), *cfg2 = cfg_with(srq2);
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();

    /* a request made with srq2 uses it until it is rejected */
    struct rpma_conn_req *req = it_next_req(ep, cfg2);
    expect_busy(&srq2, "with a pending connection request");
    CHECK_OK(rpma_conn_req_delete(&req));
    CHECK_OK(rpma_srq_delete(&srq2));
    CHECK(srq2 == NULL);

    /* a connection made with srq */
    req = it_next_req(ep, cfg);
    expect_busy(&srq, "with a connection request");
    struct rpma_conn *conn = it_accept(&req, NULL, 0);
    expect_busy(&srq, "with an established connection");

    /* it still receives through the SRQ */
    struct rpma_cq *rcq = NULL;
    CHECK_OK(rpma_srq_get_rcq(srq, &rcq));
    for (uintptr_t i = 0; i < MSGS; i++)
        CHECK_OK(rpma_srq_recv(srq, mr, i * MSG, MSG, (void *)(0x100 + i)));
    bool seen[MSGS] = {false};
    for (int m = 0; m < MSGS; m++) {
        struct ibv_wc wc;
        it_cq_get(rcq, &wc);
        if (wc.status != IBV_WC_SUCCESS) IT_FAIL("receive %d: %s", m, it_wc_status_str(wc.status));
        CHECK_EQ(wc.opcode, IBV_WC_RECV);
        CHECK_EQ(wc.byte_len, MSG);
        CHECK(wc.wr_id >= 0x100 && wc.wr_id < 0x100 + MSGS);
        int slot = (int)(wc.wr_id - 0x100);
        CHECK(!seen[slot]);
        seen[slot] = true;
        /* one connection: message m arrives m-th, in whichever slot took it */
        CHECK(it_verify(rbuf + slot * MSG, MSG, 0x5d00 + (uint64_t)m) < 0);
    }
    printf("received %d messages through the SRQ\n", MSGS);
    expect_busy(&srq, "after the receives");

    it_disconnect_passive(&conn, false);
    CHECK_OK(rpma_srq_delete(&srq));
    CHECK(srq == NULL);
    printf("srq_delete after rpma_conn_delete: 0\n");

    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_conn_cfg_delete(&cfg2));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(rbuf);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);

    /* the first attempt is rejected */
    struct rpma_conn_req *req = NULL;
    struct rpma_conn *conn = NULL;
    CHECK_OK(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
    CHECK_OK(rpma_conn_req_connect(&req, NULL, &conn));
    it_expect_event(conn, RPMA_CONN_REJECTED);
    CHECK_OK(rpma_conn_delete(&conn));

    char *sbuf = it_alloc(MSGS * MSG);
    for (int m = 0; m < MSGS; m++) it_fill(sbuf + m * MSG, MSG, 0x5d00 + (uint64_t)m);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, sbuf, MSGS * MSG, RPMA_MR_USAGE_SEND, &mr));
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, MSGS));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, MSGS));
    conn = it_connect(peer, a->addr, a->port, cfg, NULL, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    /* one at a time: the server checks the messages in order */
    for (uintptr_t m = 0; m < MSGS; m++) {
        CHECK_OK(rpma_send(conn, mr, m * MSG, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)m));
        it_cq_expect(cq, IBV_WC_SEND, (void *)m);
    }
    it_disconnect_active(&conn);
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(sbuf);
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    alarm(20);
    if (a.server)
        server(&a);
    else
        client(&a);
    printf("srq_delete %s: passed\n", a.server ? "server" : "client");
    return 0;
}
