/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cq_fd_wake.c -- a thread asleep in poll(2) on the CQ's fd (its channel made O_NONBLOCK) while
 * another thread's rpma_cq_get_wc with num_entries 1 takes one of two write completions: the
 * sleeper must wake, whichever thread read the completions off the wire.
 *
 * Why that is what a NIC does: the CQ is armed when it is created (ibv_req_notify_cq) and
 * rpma_cq_wait re-arms it after taking an event; the first completion the NIC adds to an armed
 * CQ writes one event to the channel, whoever polls the CQ and whenever. So the fd is readable
 * from the first completion on, until rpma_cq_wait takes the event. Each round starts armed, with
 * no event pending and the CQ empty, and ends the same way.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <string.h>

#include "common.h"

#define SIZE 4096
#define ROUNDS 20
#define OP 8

static void server(const struct it_args *a) {
    char *buf = it_alloc(SIZE);
    struct it_region_server srv;
    it_region_server_open(&srv, a, buf, SIZE, RPMA_MR_USAGE_WRITE_DST);
    struct rpma_conn *conn = it_region_server_accept(&srv);
    it_disconnect_passive(&conn, false);
    it_region_server_close(&srv);
    free(buf);
}

struct sleeper {
    int fd;
    pthread_barrier_t ready; /* the sleeper is about to poll */
    int polled;              /* what its poll returned */
    short revents;
};

static void *sleeper_main(void *arg) {
    struct sleeper *s = arg;
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    pthread_barrier_wait(&s->ready);
    s->polled = poll(&p, 1, IT_WAIT_MS);
    s->revents = p.revents;
    return NULL;
}

static void round_trip(struct rpma_conn *conn, struct rpma_cq *cq, int fd,
                       struct rpma_mr_local *src, struct rpma_mr_remote *dst, int i) {
    struct sleeper s = {.fd = fd, .polled = -2};
    CHECK(pthread_barrier_init(&s.ready, NULL, 2) == 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, sleeper_main, &s) == 0);
    pthread_barrier_wait(&s.ready);

    uintptr_t ctx = 0x100 + 2 * (uintptr_t)i;
    CHECK_OK(rpma_write(conn, dst, 0, src, 0, OP, RPMA_F_COMPLETION_ALWAYS, (void *)ctx));
    CHECK_OK(rpma_write(conn, dst, OP, src, OP, OP, RPMA_F_COMPLETION_ALWAYS, (void *)(ctx + 1)));
    /* this thread spins, so that it reads the answers itself where the transport lets it */
    struct ibv_wc wc;
    int got = 0, ret;
    long long deadline = it_now_ms() + IT_WAIT_MS;
    while ((ret = rpma_cq_get_wc(cq, 1, &wc, &got)) == RPMA_E_NO_COMPLETION)
        if (it_now_ms() > deadline) IT_FAIL("round %d: no completion within %d ms", i, IT_WAIT_MS);
    CHECK_OK(ret);
    CHECK_EQ(got, 1);
    CHECK_EQ(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ(wc.wr_id, ctx);

    CHECK(pthread_join(th, NULL) == 0);
    CHECK(pthread_barrier_destroy(&s.ready) == 0);
    if (s.polled != 1 || !(s.revents & POLLIN))
        IT_FAIL("round %d: the thread asleep on the CQ's fd was not woken (poll returned %d)", i,
                s.polled);
    CHECK_OK(rpma_cq_wait(cq)); /* the event it woke for: taken, the CQ re-armed */
    it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)(ctx + 1));
    it_cq_take_events(cq); /* the second completion's, if it came after the re-arm */
    it_cq_expect_empty(cq);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *buf = it_alloc(SIZE);
    struct rpma_mr_local *src = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, SIZE, RPMA_MR_USAGE_WRITE_SRC, &src));
    struct rpma_mr_remote *dst = NULL;
    struct rpma_cq *cq = NULL;
    struct rpma_conn *conn = it_connect_region(peer, a, NULL, NULL, 0, &dst, &cq);
    int fd = -1;
    CHECK_OK(rpma_cq_get_fd(cq, &fd));
    it_set_nonblock(fd);
    CHECK_ERR(rpma_cq_wait(cq), RPMA_E_NO_COMPLETION); /* armed, nothing completed yet */

    for (int i = 0; i < ROUNDS; i++) round_trip(conn, cq, fd, src, dst, i);

    it_disconnect_region(&conn, &dst);
    CHECK_OK(rpma_mr_dereg(&src));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
