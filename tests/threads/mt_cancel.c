/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mt_cancel.c -- pthread_cancel(3) of threads blocked in the library's waits, as a program that
 * shuts its completion threads down that way does: each cancelled thread ends (joined,
 * PTHREAD_CANCELED), the process does not abort (found by a probe, 2026-11-27: "exception not
 * rethrown"), and the connection then works as before, which needs everything the cancelled
 * waiters held (the reading of the connection's answers, its requests) given back.
 *
 * The client's connection has an RCQ: sends complete on the CQ, receives on the RCQ. In each of
 * ROUNDS rounds the client cancels, in turn: a thread in rpma_cq_wait on the CQ; one on the
 * RCQ; two at once, one on each (one of them sleeps owning the reading of the answers, the other
 * waits for its turn); a thread in rpma_conn_next_event. After each it sends a message and
 * waits for its completion and the server's answer. The server cancels a thread in
 * rpma_ep_next_conn_req once, and answers every message.
 *
 * Each completion is taken through rpma_cq_wait, so no completion event is left on a channel
 * when the next waiter starts. A waiter that reads such an event as it is cancelled ends with
 * the event taken and never acked on glibc 2.36, which enables asynchronous cancellation around
 * the read; ibv_destroy_cq then waits for that ack for ever. It hung the reference's client in
 * rpma_conn_delete once in the guest (CI, 2026-11-27).
 */
#define _GNU_SOURCE
#include <string.h>

#include "mt.h"

#define MSG 16
#define WR_SEND 0x5e
#define WR_RECV 0x7e

enum waiter_kind { WAIT_CQ, WAIT_RCQ, WAIT_EVENT, WAIT_REQ };

struct blocked {
    enum waiter_kind kind;
    struct rpma_cq *cq;
    struct rpma_conn *conn;
    struct rpma_ep *ep;
};

static void *block(void *arg) {
    struct blocked *b = arg;
    for (;;) {
        int ret;
        if (b->kind == WAIT_EVENT) {
            enum rpma_conn_event ev;
            ret = rpma_conn_next_event(b->conn, &ev);
            if (ret == 0) IT_FAIL("an event (%d) where none could come", (int)ev);
        } else if (b->kind == WAIT_REQ) {
            struct rpma_conn_req *req = NULL;
            ret = rpma_ep_next_conn_req(b->ep, NULL, &req);
            if (ret == 0) IT_FAIL("a connection request where none could come");
        } else {
            ret = rpma_cq_wait(b->cq);
            if (ret == 0) continue; /* a stale event: wait again */
        }
        IT_FAIL("a wait returned %d (%s) before it was cancelled", ret, rpma_err_2str(ret));
    }
    return NULL;
}

/* the completion, woken for: the CQ's one event is taken and acked here, not by a waiter */
static void expect_woken(struct rpma_cq *cq, enum ibv_wc_opcode opcode, const void *op_context) {
    CHECK_OK(rpma_cq_wait(cq));
    it_cq_expect(cq, opcode, op_context);
}

/* starts n blocked threads and cancels them; each must end cancelled */
static void cancel_blocked(struct blocked *b, int n) {
    pthread_t th[2];
    mt_start(th, n, block, b, sizeof(*b));
    for (int k = 0; k < n; k++)
        if (pthread_cancel(th[k]) != 0) IT_FAIL("pthread_cancel failed");
    for (int k = 0; k < n; k++) {
        void *res = NULL;
        if (pthread_join(th[k], &res) != 0) IT_FAIL("pthread_join failed");
        if (res != PTHREAD_CANCELED) IT_FAIL("a waiter ended without being cancelled");
    }
}

/* the server's own cancelled waiter, once its connection is up */
static void cancel_next_req(struct rpma_ep *ep) {
    struct blocked b = {.kind = WAIT_REQ, .ep = ep};
    cancel_blocked(&b, 1);
    printf("server: a thread in rpma_ep_next_conn_req cancelled\n");
}

static void server(const struct it_args *a) {
    mt_answer_server(a, (int)mt_arg(a, 0, 5) * 4, MSG, cancel_next_req);
}

static void client(const struct it_args *a) {
    int rounds = (int)mt_arg(a, 0, 5);
    struct mt_rcq_client c;
    mt_rcq_client_open(a, MSG, 4, &c);
    struct rpma_conn *conn = c.conn;
    struct rpma_cq *cq = c.cq, *rcq = c.rcq;
    int cancelled = 0;
    for (int r = 0; r < rounds; r++) {
        for (int step = 0; step < 4; step++) {
            struct blocked b[2] = {{.kind = WAIT_CQ, .cq = cq}, {.kind = WAIT_RCQ, .cq = rcq}};
            if (step == 1) b[0] = b[1];
            if (step == 3) b[0] = (struct blocked){.kind = WAIT_EVENT, .conn = conn};
            int n = step == 2 ? 2 : 1;
            cancel_blocked(b, n);
            cancelled += n;
            /* the connection works on: a message and its answer */
            CHECK_OK(rpma_recv(conn, c.mr, MSG, MSG, (void *)WR_RECV));
            CHECK_OK(rpma_send(conn, c.mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_SEND));
            expect_woken(cq, IBV_WC_SEND, (void *)WR_SEND);
            expect_woken(rcq, IBV_WC_RECV, (void *)WR_RECV);
        }
    }
    printf("client: %d waiters cancelled, the connection answered after each\n", cancelled);
    mt_rcq_client_close(&c);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
