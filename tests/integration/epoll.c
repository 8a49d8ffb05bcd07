/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * epoll.c -- both sides drive everything from one epoll loop over non-blocking fds: the
 * endpoint's fd (server), the connection's event fd and the CQ's fd, handling RPMA_E_NO_EVENT and
 * RPMA_E_NO_COMPLETION. The client pings, the server echoes a transformed pong.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common.h"

#define ROUNDS 50
#define MSG 56
#define LOOP_MS 40000

enum tag { TAG_EP = 1, TAG_EVENT, TAG_CQ };

static uint64_t ping_seed(int i) {
    return 0xe900 + 2 * (uint64_t)i;
}
static uint64_t pong_seed(int i) {
    return 0xe900 + 2 * (uint64_t)i + 1;
}

static void watch(int epfd, int fd, enum tag tag) {
    it_set_nonblock(fd);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = tag};
    CHECK(epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0);
}

static void unwatch(int epfd, int fd) {
    CHECK(epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL) == 0);
}

/* the next batch of ready tags; fails when the loop's deadline passed */
static int wait_ready(int epfd, long long deadline, struct epoll_event *evs, int max) {
    for (;;) {
        long long left = deadline - it_now_ms();
        if (left <= 0) IT_FAIL("epoll loop ran out of time");
        int n = epoll_wait(epfd, evs, max, (int)left);
        if (n > 0) return n;
        if (n < 0 && errno != EINTR) IT_FAIL("epoll_wait failed");
    }
}

/* what rpma_ep_next_conn_req and rpma_conn_next_event give on a drained non-blocking fd:
 * RPMA_E_NO_EVENT (the man page of the former says so); the reference gives RPMA_E_PROVIDER
 * (rdma_get_cm_event fails with EAGAIN) */
static void check_drained(int ret) {
    if (it_reference() && ret == RPMA_E_PROVIDER) return;
    CHECK_ERR(ret, RPMA_E_NO_EVENT);
}

struct side {
    struct rpma_peer *peer;
    struct rpma_conn *conn;
    struct rpma_cq *cq;
    struct rpma_mr_local *smr, *rmr;
    char *sbuf, *rbuf;
    int ev_fd, cq_fd;
    int recvs, sends_posted, sends_done;
    bool established, closed;
};

static void side_mrs(struct side *s) {
    s->sbuf = it_alloc(ROUNDS * MSG);
    s->rbuf = it_alloc(MSG);
    CHECK_OK(rpma_mr_reg(s->peer, s->sbuf, ROUNDS * MSG, RPMA_MR_USAGE_SEND, &s->smr));
    CHECK_OK(rpma_mr_reg(s->peer, s->rbuf, MSG, RPMA_MR_USAGE_RECV, &s->rmr));
}

static void side_free(struct side *s) {
    CHECK_OK(rpma_mr_dereg(&s->smr));
    CHECK_OK(rpma_mr_dereg(&s->rmr));
    CHECK_OK(rpma_peer_delete(&s->peer));
    free(s->sbuf);
    free(s->rbuf);
}

static void post_send(struct side *s, uint64_t seed) {
    int i = s->sends_posted++;
    CHECK(i < ROUNDS);
    it_fill(s->sbuf + i * MSG, MSG, seed);
    CHECK_OK(rpma_send(s->conn, s->smr, (size_t)i * MSG, MSG, RPMA_F_COMPLETION_ALWAYS,
                       (void *)(0x100 + (uintptr_t)i)));
}

static void post_recv(struct side *s) {
    CHECK_OK(rpma_recv(s->conn, s->rmr, 0, MSG, (void *)(0x1000 + (uintptr_t)s->recvs)));
}

/* drains the CQ; on_recv gets each message in turn */
static void drain(struct side *s, void (*on_recv)(struct side *)) {
    it_cq_take_events(s->cq);
    struct ibv_wc wc;
    int got = 0, ret;
    while ((ret = rpma_cq_get_wc(s->cq, 1, &wc, &got)) == 0) {
        CHECK_EQ(got, 1);
        CHECK_EQ(wc.status, IBV_WC_SUCCESS);
        if (wc.opcode == IBV_WC_SEND) {
            CHECK_EQ(wc.wr_id, 0x100 + (uint64_t)s->sends_done);
            s->sends_done++;
        } else {
            CHECK_EQ(wc.opcode, IBV_WC_RECV);
            CHECK_EQ(wc.wr_id, 0x1000 + (uint64_t)s->recvs);
            CHECK_EQ(wc.byte_len, MSG);
            on_recv(s);
        }
    }
    CHECK_ERR(ret, RPMA_E_NO_COMPLETION);
}

static void server_on_recv(struct side *s) {
    long bad = it_verify(s->rbuf, MSG, ping_seed(s->recvs));
    if (bad >= 0) IT_FAIL("ping %d differs at byte %ld", s->recvs, bad);
    s->recvs++;
    if (s->recvs < ROUNDS) post_recv(s);
    post_send(s, pong_seed(s->recvs - 1));
}

static void server(const struct it_args *a) {
    struct side s = {0};
    s.peer = it_peer_new(a->addr, true);
    side_mrs(&s);
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(s.peer, a->addr, a->port, &ep));
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    CHECK(epfd >= 0);
    int ep_fd = -1;
    CHECK_OK(rpma_ep_get_fd(ep, &ep_fd));
    watch(epfd, ep_fd, TAG_EP);
    struct rpma_conn_req *req = NULL;
    /* nobody connects before READY */
    check_drained(rpma_ep_next_conn_req(ep, NULL, &req));
    it_ready();

    long long deadline = it_now_ms() + LOOP_MS;
    while (!s.closed) {
        struct epoll_event evs[4];
        int n = wait_ready(epfd, deadline, evs, 4);
        for (int e = 0; e < n; e++) {
            switch (evs[e].data.u32) {
                case TAG_EP: {
                    int ret = RPMA_E_NO_EVENT;
                    while ((ret = rpma_ep_next_conn_req(ep, NULL, &req)) == 0) {
                        CHECK(s.conn == NULL); /* one client only */
                        CHECK_OK(rpma_conn_req_recv(req, s.rmr, 0, MSG, (void *)0x1000));
                        CHECK_OK(rpma_conn_req_connect(&req, NULL, &s.conn));
                        CHECK_OK(rpma_conn_get_event_fd(s.conn, &s.ev_fd));
                        CHECK_OK(rpma_conn_get_cq(s.conn, &s.cq));
                        CHECK_OK(rpma_cq_get_fd(s.cq, &s.cq_fd));
                        watch(epfd, s.ev_fd, TAG_EVENT);
                        watch(epfd, s.cq_fd, TAG_CQ);
                    }
                    check_drained(ret);
                    break;
                }
                case TAG_EVENT: {
                    enum rpma_conn_event ev;
                    int ret = RPMA_E_NO_EVENT;
                    while (!s.closed && (ret = rpma_conn_next_event(s.conn, &ev)) == 0) {
                        if (ev == RPMA_CONN_ESTABLISHED) {
                            CHECK(!s.established);
                            s.established = true;
                        } else if (ev == RPMA_CONN_CLOSED) {
                            CHECK(s.established);
                            s.closed = true;
                        } else {
                            IT_FAIL("unexpected event %s", rpma_utils_conn_event_2str(ev));
                        }
                    }
                    if (!s.closed) check_drained(ret);
                    break;
                }
                case TAG_CQ:
                    drain(&s, server_on_recv);
                    break;
            }
        }
    }
    /* the last pong was delivered, so its completion comes even if CLOSED came first */
    drain(&s, server_on_recv);
    long long end = it_now_ms() + IT_WAIT_MS;
    while (s.sends_done < ROUNDS) {
        long long left = end - it_now_ms();
        if (left <= 0 || !it_poll_fd(s.cq_fd, (int)left))
            IT_FAIL("%d of %d send completions", s.sends_done, ROUNDS);
        drain(&s, server_on_recv);
    }
    CHECK_EQ(s.recvs, ROUNDS);
    CHECK_EQ(s.sends_done, ROUNDS);
    unwatch(epfd, s.ev_fd);
    unwatch(epfd, s.cq_fd);
    CHECK_OK(rpma_conn_disconnect(s.conn));
    CHECK_OK(rpma_conn_delete(&s.conn));
    unwatch(epfd, ep_fd);
    CHECK_OK(rpma_ep_shutdown(&ep));
    close(epfd);
    side_free(&s);
}

static void client_on_recv(struct side *s) {
    long bad = it_verify(s->rbuf, MSG, pong_seed(s->recvs));
    if (bad >= 0) IT_FAIL("pong %d differs at byte %ld", s->recvs, bad);
    s->recvs++;
    if (s->recvs < ROUNDS) {
        post_recv(s);
        post_send(s, ping_seed(s->recvs));
    }
}

static void client(const struct it_args *a) {
    struct side s = {0};
    s.peer = it_peer_new(a->addr, false);
    side_mrs(&s);
    struct rpma_conn_req *req = NULL;
    CHECK_OK(rpma_conn_req_new(s.peer, a->addr, a->port, NULL, &req));
    CHECK_OK(rpma_conn_req_connect(&req, NULL, &s.conn));
    CHECK_OK(rpma_conn_get_event_fd(s.conn, &s.ev_fd));
    CHECK_OK(rpma_conn_get_cq(s.conn, &s.cq));
    CHECK_OK(rpma_cq_get_fd(s.cq, &s.cq_fd));
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    CHECK(epfd >= 0);
    watch(epfd, s.ev_fd, TAG_EVENT);
    watch(epfd, s.cq_fd, TAG_CQ);
    /* nothing posted yet: no completion event */
    CHECK_ERR(rpma_cq_wait(s.cq), RPMA_E_NO_COMPLETION);

    bool disconnecting = false;
    long long deadline = it_now_ms() + LOOP_MS;
    while (!s.closed) {
        struct epoll_event evs[4];
        int n = wait_ready(epfd, deadline, evs, 4);
        for (int e = 0; e < n; e++) {
            if (evs[e].data.u32 == TAG_EVENT) {
                enum rpma_conn_event ev;
                int ret = RPMA_E_NO_EVENT;
                while (!s.closed && (ret = rpma_conn_next_event(s.conn, &ev)) == 0) {
                    if (ev == RPMA_CONN_ESTABLISHED) {
                        CHECK(!s.established);
                        s.established = true;
                        post_recv(&s);
                        post_send(&s, ping_seed(0));
                    } else if (ev == RPMA_CONN_CLOSED) {
                        CHECK(disconnecting);
                        s.closed = true;
                    } else {
                        IT_FAIL("unexpected event %s", rpma_utils_conn_event_2str(ev));
                    }
                }
                if (!s.closed) check_drained(ret);
            } else if (!s.closed) {
                drain(&s, client_on_recv);
            }
        }
        if (!disconnecting && s.recvs == ROUNDS && s.sends_done == ROUNDS) {
            disconnecting = true;
            CHECK_OK(rpma_conn_disconnect(s.conn));
        }
    }
    unwatch(epfd, s.ev_fd);
    unwatch(epfd, s.cq_fd);
    CHECK_OK(rpma_conn_delete(&s.conn));
    close(epfd);
    side_free(&s);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
