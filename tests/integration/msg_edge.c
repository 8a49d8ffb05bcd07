/*
 * Messaging edge cases, one connection each:
 *   rnr       the client sends before the server has posted any receive: the sends wait
 *             (no completion) until receives are posted, then all complete in order
 *   oversize  a message longer than the posted buffer: IBV_WC_LOC_LEN_ERR at the receiver (as
 *             the IB spec and hardware NICs report it; rxe reports IBV_WC_LOC_QP_OP_ERR, which
 *             RDMA allows too), an error completion at the sender, and later sends are flushed
 *   sqfull    with sq_size 2 and the sends held back by a missing receive, posting fails with
 *             RPMA_E_PROVIDER once the send queue is full: not before 2 posts, and within 64 (a
 *             NIC may round the queue up: rxe takes 3); after the receives arrive everything
 *             completes, and a short last message tells the server the count
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "common.h"

#define MSG 64
#define N 3
#define SQ_BOUND 64 /* sqfull: the post that fails comes within this many */
#define LAST 8      /* sqfull: the length of the last message */
enum { CASE_RNR, CASE_OVERSIZE, CASE_SQFULL, CASES };

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *rbuf = it_alloc(N * MSG);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, rbuf, N * MSG, RPMA_MR_USAGE_RECV, &mr));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    for (int c = 0; c < CASES; c++) {
        struct rpma_conn_req *req = it_next_req(ep, NULL);
        struct rpma_conn *conn = it_accept(&req, NULL, 0);
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conn, &cq));
        struct ibv_wc wc;
        if (c == CASE_OVERSIZE) {
            CHECK_OK(rpma_recv(conn, mr, 0, 16, (void *)0x51));
            it_cq_get(cq, &wc);
            CHECK_EQ(wc.wr_id, 0x51);
            if (wc.status != IBV_WC_LOC_LEN_ERR && wc.status != IBV_WC_LOC_QP_OP_ERR)
                IT_FAIL("oversized message: receive status %s", it_wc_status_str(wc.status));
        } else if (c == CASE_SQFULL) {
            /* as many messages as the client's queue took, then a short one; a freed buffer is
             * posted again */
            usleep(500 * 1000);
            it_cq_expect_empty(cq);
            for (int i = 0; i < N; i++)
                CHECK_OK(rpma_recv(conn, mr, (size_t)i * MSG, MSG, (void *)(0x60 + (uintptr_t)i)));
            for (int j = 0;; j++) {
                it_cq_get(cq, &wc);
                CHECK_EQ(wc.status, IBV_WC_SUCCESS);
                CHECK(wc.wr_id >= 0x60 && wc.wr_id < 0x60 + N);
                size_t slot = wc.wr_id - 0x60;
                if (wc.byte_len == LAST) break;
                CHECK_EQ(wc.byte_len, MSG);
                CHECK(j < SQ_BOUND);
                long bad = it_verify(rbuf + slot * MSG, MSG, 0x700 + (uint64_t)(j % N));
                if (bad >= 0) IT_FAIL("case %d: message %d differs at %ld", c, j, bad);
                CHECK_OK(rpma_recv(conn, mr, slot * MSG, MSG, (void *)wc.wr_id));
            }
        } else {
            /* let the client's sends wait for a while with nothing posted */
            usleep(500 * 1000);
            it_cq_expect_empty(cq);
            for (int i = 0; i < N; i++)
                CHECK_OK(rpma_recv(conn, mr, (size_t)i * MSG, MSG, (void *)(0x60 + (uintptr_t)i)));
            for (int i = 0; i < N; i++) {
                it_cq_get(cq, &wc);
                CHECK_EQ(wc.status, IBV_WC_SUCCESS);
                CHECK_EQ(wc.opcode, IBV_WC_RECV);
                CHECK_EQ(wc.byte_len, MSG);
                CHECK(wc.wr_id >= 0x60 && wc.wr_id < 0x60 + N);
                long bad = it_verify(rbuf + (wc.wr_id - 0x60) * MSG, MSG, 0x700 + (uint64_t)i);
                if (bad >= 0) IT_FAIL("case %d: message %d differs at %ld", c, i, bad);
            }
        }
        it_disconnect_passive(&conn, c == CASE_OVERSIZE);
        printf("case %d ok\n", c);
    }
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(rbuf);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *sbuf = it_alloc(N * MSG);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, sbuf, N * MSG, RPMA_MR_USAGE_SEND, &mr));
    for (int i = 0; i < N; i++) it_fill(sbuf + i * MSG, MSG, 0x700 + (uint64_t)i);
    for (int c = 0; c < CASES; c++) {
        struct rpma_conn_cfg *cfg = NULL;
        CHECK_OK(rpma_conn_cfg_new(&cfg));
        if (c == CASE_SQFULL) CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, 2));
        struct rpma_conn *conn = it_connect(peer, a->addr, a->port, cfg, NULL, 0);
        CHECK_OK(rpma_conn_cfg_delete(&cfg));
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conn, &cq));
        struct ibv_wc wc;
        if (c == CASE_OVERSIZE) {
            CHECK_OK(rpma_send(conn, mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)0x71));
            it_cq_get(cq, &wc);
            CHECK_EQ(wc.wr_id, 0x71);
            if (wc.status == IBV_WC_SUCCESS) IT_FAIL("oversized send completed successfully");
            CHECK_OK(rpma_send(conn, mr, 0, 8, RPMA_F_COMPLETION_ALWAYS, (void *)0x72));
            it_cq_get(cq, &wc);
            CHECK_EQ(wc.wr_id, 0x72);
            CHECK_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
        } else {
            int posted = N;
            if (c == CASE_SQFULL) {
                /* the queue holds at least its size; where it ends is the provider's choice */
                int ret = 0;
                for (posted = 0; posted < SQ_BOUND; posted++) {
                    ret = rpma_send(conn, mr, (size_t)(posted % N) * MSG, MSG,
                                    RPMA_F_COMPLETION_ALWAYS, (void *)(0x80 + (uintptr_t)posted));
                    if (ret != 0) break;
                }
                printf("sqfull: %d sends taken with sq_size 2\n", posted);
                CHECK(posted >= 2 && posted < SQ_BOUND);
                CHECK_EQ(ret, RPMA_E_PROVIDER);
            } else {
                for (int i = 0; i < posted; i++)
                    CHECK_OK(rpma_send(conn, mr, (size_t)i * MSG, MSG, RPMA_F_COMPLETION_ALWAYS,
                                       (void *)(0x80 + (uintptr_t)i)));
            }
            /* no receive posted yet on the other side: nothing may complete */
            CHECK(!it_cq_next(cq, &wc, 200));
            for (int i = 0; i < posted; i++)
                it_cq_expect(cq, IBV_WC_SEND, (void *)(0x80 + (uintptr_t)i));
            if (c == CASE_SQFULL) {
                /* the slots are back: the last message goes now */
                CHECK_OK(rpma_send(conn, mr, 0, LAST, RPMA_F_COMPLETION_ALWAYS, (void *)0x7f));
                it_cq_expect(cq, IBV_WC_SEND, (void *)0x7f);
            }
        }
        CHECK_OK(rpma_conn_disconnect(conn));
        enum rpma_conn_event ev = it_next_event(conn);
        if (ev != RPMA_CONN_CLOSED) IT_FAIL("case %d: event %s", c, rpma_utils_conn_event_2str(ev));
        CHECK_OK(rpma_conn_delete(&conn));
    }
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(sbuf);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
