/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mt_two_cqs.c -- two threads each wait on their own CQ of one connection: one in rpma_cq_wait
 * on the CQ (its sends' completions), one on the RCQ (its receives). Each must wake for its own
 * completions, whatever the other does; a thread asleep on one CQ must not keep the other
 * waiting (found by a probe, 2026-11-27: the second waiter waited for the first one's sleep to
 * end, which the first one's CQ decided).
 *
 * The client posts a receive and sends a message ROUNDS times; the server answers each message
 * with one of its own. The client's main thread checks after each round that both waiters have
 * counted it (within IT_WAIT_MS, else the test fails as a hang). Both waiters block in
 * rpma_cq_wait the whole time, so in most rounds one sleeps while the other's completion comes.
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "mt.h"

#define MSG 16
#define SLOTS 4
#define WR_SEND 0x5e
#define WR_RECV 0x7e

struct waiter {
    struct rpma_cq *cq;
    enum ibv_wc_opcode op;
    atomic_int count; /* successful completions seen */
};

static void *wait_loop(void *arg) {
    struct waiter *w = arg;
    for (;;) {
        int ret = rpma_cq_wait(w->cq);
        if (ret == RPMA_E_NO_COMPLETION) continue;
        if (ret != 0) IT_FAIL("rpma_cq_wait returned %d (%s)", ret, rpma_err_2str(ret));
        struct ibv_wc wc[SLOTS];
        int got = 0;
        while ((ret = rpma_cq_get_wc(w->cq, SLOTS, wc, &got)) == 0) {
            for (int k = 0; k < got; k++) {
                if (wc[k].status != IBV_WC_SUCCESS || wc[k].opcode != w->op)
                    IT_FAIL("a completion with status %d, opcode %d on the %s waiter's CQ",
                            (int)wc[k].status, (int)wc[k].opcode,
                            w->op == IBV_WC_SEND ? "send" : "receive");
                atomic_fetch_add(&w->count, 1);
            }
        }
        if (ret != RPMA_E_NO_COMPLETION) IT_FAIL("rpma_cq_get_wc returned %d", ret);
    }
}

static void server(const struct it_args *a) {
    mt_answer_server(a, (int)mt_arg(a, 0, 100), MSG, NULL);
}

static void client(const struct it_args *a) {
    int rounds = (int)mt_arg(a, 0, 100);
    struct mt_rcq_client c;
    mt_rcq_client_open(a, MSG, SLOTS, &c);
    struct waiter w[2] = {{.op = IBV_WC_SEND, .cq = c.cq}, {.op = IBV_WC_RECV, .cq = c.rcq}};
    pthread_t th[2];
    mt_start(th, 2, wait_loop, w, sizeof(w[0]));

    for (int r = 0; r < rounds; r++) {
        CHECK_OK(rpma_recv(c.conn, c.mr, MSG, MSG, (void *)WR_RECV));
        CHECK_OK(rpma_send(c.conn, c.mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_SEND));
        long long until = it_now_ms() + IT_WAIT_MS;
        while ((atomic_load(&w[0].count) <= r || atomic_load(&w[1].count) <= r) &&
               it_now_ms() < until)
            usleep(100);
        if (atomic_load(&w[0].count) <= r || atomic_load(&w[1].count) <= r)
            IT_FAIL(
                "round %d: after %d ms the send waiter has counted %d completions, the "
                "receive waiter %d (a waiter that never woke)",
                r, IT_WAIT_MS, atomic_load(&w[0].count), atomic_load(&w[1].count));
    }
    /* The waiters stay blocked in rpma_cq_wait: the process ends under them, which ends the
     * connection (the server gets CLOSED, as from a process that exits on RDMA). */
    printf("client: %d rounds, both waiters woke for each\n", rounds);
    fflush(stdout);
    _exit(0);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
