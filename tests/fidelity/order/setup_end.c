/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * setup_end.c -- a client that gives up on a connection while it is being set up: the
 * connection ends on both sides and nothing waits for an event that never comes.
 *
 * A control connection (C) orders the steps: the server tells the client when it holds the
 * request, the client tells the server when it has given up. The request being given up on is A
 * (its private data: 'A' and the round).
 *
 * Scenarios (the first argument; the second, optional, is the number of rounds):
 *   disc_before_est     the server holds A; the client calls rpma_conn_disconnect on A before
 *                       ESTABLISHED, and the server then accepts it. The client's next event must
 *                       be LOST (as RDMA CM reports a reply that finds the QP in error), never
 *                       ESTABLISHED.
 *   gone_before_accept  the server holds A; the client deletes A, and the server then accepts
 *                       it.
 *   gone_before_take    the client deletes A before the server takes it, then connects B; the
 *                       server takes requests until B. tcp and shm drop A once the client's end
 *                       has reached them (the call then finds none, RPMA_E_NO_EVENT, unless B is
 *                       there); over RDMA CM (the reference, rpma's verbs) the call fails.
 * Where the server accepts A, rpma_conn_req_connect either fails with RPMA_E_PROVIDER (the
 * reference, and rpma once it has seen the client's end) or succeeds, and then the connection
 * must end (CLOSED, REJECTED or LOST, after at most one ESTABLISHED).
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "common.h"

#define ALARM_S 45
#define MSG 8
#define WR_CTL_SEND 0xc5
#define WR_CTL_RECV 0xc7

enum scenario { DISC_BEFORE_EST, GONE_BEFORE_ACCEPT, GONE_BEFORE_TAKE };
enum ctl_word { TAKEN = 1, GAVE_UP = 2 };

struct plan {
    enum scenario what;
    int rounds;
    const char *name;
};

/* the control connection: receives on their own CQ, so a send's completion and the peer's next
 * message may come in either order */
struct ctl {
    struct rpma_conn *conn;
    struct rpma_cq *cq, *rcq;
    struct rpma_mr_local *mr;
    char *buf; /* [0, MSG): what is sent; [MSG, 2 MSG): what is received */
};

static struct rpma_conn_cfg *ctl_cfg(void) {
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_rcq_size(cfg, 4));
    return cfg;
}

static void ctl_open(struct ctl *c, struct rpma_peer *peer) {
    c->buf = it_alloc(2 * MSG);
    CHECK_OK(rpma_mr_reg(peer, c->buf, 2 * MSG, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &c->mr));
}

static void ctl_start(struct ctl *c) {
    CHECK_OK(rpma_conn_get_cq(c->conn, &c->cq));
    CHECK_OK(rpma_conn_get_rcq(c->conn, &c->rcq));
}

static void ctl_send(struct ctl *c, uint32_t word, uint32_t round) {
    uint32_t m[2] = {word, round};
    memcpy(c->buf, m, sizeof(m));
    CHECK_OK(rpma_send(c->conn, c->mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_CTL_SEND));
    it_cq_expect(c->cq, IBV_WC_SEND, (void *)WR_CTL_SEND);
}

/* the receive for the next message is posted ahead (ctl_post) */
static void ctl_post(struct ctl *c) {
    CHECK_OK(rpma_recv(c->conn, c->mr, MSG, MSG, (void *)WR_CTL_RECV));
}

static void ctl_expect(struct ctl *c, uint32_t word, uint32_t round) {
    it_cq_expect(c->rcq, IBV_WC_RECV, (void *)WR_CTL_RECV);
    uint32_t m[2];
    memcpy(m, c->buf + MSG, sizeof(m));
    if (m[0] != word || m[1] != round)
        IT_FAIL("control message %u of round %u, expected %u of round %u", m[0], m[1], word, round);
    ctl_post(c);
}

/* A's connect, without waiting for its outcome */
static struct rpma_conn *connect_a(struct rpma_peer *peer, const struct it_args *a, int round) {
    struct rpma_conn_req *req = NULL;
    CHECK_OK(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
    unsigned char tag[2] = {'A', (unsigned char)round};
    struct rpma_conn_private_data pd = {.ptr = tag, .len = sizeof(tag)};
    struct rpma_conn *conn = NULL;
    CHECK_OK(rpma_conn_req_connect(&req, &pd, &conn));
    CHECK(conn != NULL);
    return conn;
}

/* the request's tag: 'A' or 'B' in [0], the round in [1] */
static void req_tag(struct rpma_conn_req *req, unsigned char tag[2]) {
    struct rpma_conn_private_data pd = {0};
    CHECK_OK(rpma_conn_req_get_private_data(req, &pd));
    CHECK(pd.ptr != NULL && pd.len >= 2);
    memcpy(tag, pd.ptr, 2);
}

/* what became of the requests given up on, as the server saw them */
static int refused_accepts, ended_accepts, failed_takes;

/* the server accepts A after the client gave up on it: refused, or a connection that ends */
static void accept_given_up(struct rpma_conn_req **req, const struct plan *p, int round) {
    struct rpma_conn *conn = NULL;
    int ret = rpma_conn_req_connect(req, NULL, &conn);
    if (ret != 0) {
        if (ret != RPMA_E_PROVIDER)
            IT_FAIL("%s round %d: accepting a request the client gave up on returned %d (%s)",
                    p->name, round, ret, rpma_err_2str(ret));
        CHECK(*req == NULL && conn == NULL);
        refused_accepts++;
        return;
    }
    ended_accepts++;
    enum rpma_conn_event ev = it_next_event(conn);
    if (ev == RPMA_CONN_ESTABLISHED) ev = it_next_event(conn);
    if (ev != RPMA_CONN_CLOSED && ev != RPMA_CONN_REJECTED && ev != RPMA_CONN_LOST)
        IT_FAIL("%s round %d: a connection the client gave up on got %s (%d)", p->name, round,
                rpma_utils_conn_event_2str(ev), (int)ev);
    CHECK_OK(rpma_conn_delete(&conn));
}

static void server(const struct it_args *a, const struct plan *p) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    struct ctl c = {0};
    ctl_open(&c, peer);
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn_cfg *cfg = ctl_cfg();
    struct rpma_conn_req *creq = it_next_req(ep, cfg);
    CHECK_OK(rpma_conn_req_recv(creq, c.mr, MSG, MSG, (void *)WR_CTL_RECV));
    c.conn = it_accept(&creq, NULL, 0);
    ctl_start(&c);

    for (int r = 0; r < p->rounds; r++) {
        if (p->what != GONE_BEFORE_TAKE) {
            struct rpma_conn_req *req = it_next_req(ep, NULL);
            unsigned char tag[2];
            req_tag(req, tag);
            CHECK(tag[0] == 'A' && tag[1] == (unsigned char)r);
            ctl_send(&c, TAKEN, (uint32_t)r);
            ctl_expect(&c, GAVE_UP, (uint32_t)r);
            accept_given_up(&req, p, r);
            continue;
        }
        /* A may come (then refused or ended) or not; B comes */
        ctl_expect(&c, GAVE_UP, (uint32_t)r);
        int fd = -1;
        CHECK_OK(rpma_ep_get_fd(ep, &fd));
        for (;;) {
            if (!it_poll_fd(fd, IT_WAIT_MS))
                IT_FAIL("%s round %d: no request within %d ms", p->name, r, IT_WAIT_MS);
            struct rpma_conn_req *req = NULL;
            int ret = rpma_ep_next_conn_req(ep, NULL, &req);
            if (ret != 0) {
                /* tcp and shm drop a departed client's request (no other one ready: NO_EVENT);
                 * over RDMA CM the call fails on it (creating its QP fails) */
                if ((ret != RPMA_E_NO_EVENT && !it_nic()) || ++failed_takes > 2 * p->rounds)
                    IT_FAIL("%s round %d: rpma_ep_next_conn_req returned %d (%s)", p->name, r, ret,
                            rpma_err_2str(ret));
                continue;
            }
            unsigned char tag[2];
            req_tag(req, tag);
            CHECK(tag[1] == (unsigned char)r);
            if (tag[0] == 'A') {
                accept_given_up(&req, p, r);
                continue;
            }
            CHECK(tag[0] == 'B');
            struct rpma_conn *conn = it_accept(&req, NULL, 0);
            it_disconnect_passive(&conn, false);
            break;
        }
    }
    it_disconnect_passive(&c.conn, false);
    printf(
        "server: %s: %d rounds; requests given up on: %d accepts refused, %d accepted and ended, "
        "%d takes that found none or failed\n",
        p->name, p->rounds, refused_accepts, ended_accepts, failed_takes);
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&c.mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(c.buf);
}

static void client(const struct it_args *a, const struct plan *p) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    struct ctl c = {0};
    ctl_open(&c, peer);
    struct rpma_conn_cfg *cfg = ctl_cfg();
    c.conn = it_connect(peer, a->addr, a->port, cfg, "C", 1);
    ctl_start(&c);
    ctl_post(&c);
    long long t0 = it_now_ms();

    for (int r = 0; r < p->rounds; r++) {
        struct rpma_conn *conn = connect_a(peer, a, r);
        if (p->what == GONE_BEFORE_TAKE) {
            CHECK_OK(rpma_conn_delete(&conn));
            ctl_send(&c, GAVE_UP, (uint32_t)r);
            unsigned char tag[2] = {'B', (unsigned char)r};
            struct rpma_conn *b = it_connect(peer, a->addr, a->port, NULL, tag, sizeof(tag));
            it_disconnect_active(&b);
            continue;
        }
        ctl_expect(&c, TAKEN, (uint32_t)r);
        if (p->what == GONE_BEFORE_ACCEPT) {
            CHECK_OK(rpma_conn_delete(&conn));
            ctl_send(&c, GAVE_UP, (uint32_t)r);
            continue;
        }
        CHECK_OK(rpma_conn_disconnect(conn));
        ctl_send(&c, GAVE_UP, (uint32_t)r);
        enum rpma_conn_event ev = it_next_event(conn);
        if (ev != RPMA_CONN_LOST)
            IT_FAIL(
                "%s round %d: a connection disconnected before ESTABLISHED got %s (%d), "
                "expected RPMA_CONN_LOST",
                p->name, r, rpma_utils_conn_event_2str(ev), (int)ev);
        CHECK_OK(rpma_conn_delete(&conn));
    }
    it_disconnect_active(&c.conn);
    printf("client: %s: %d rounds in %lld ms\n", p->name, p->rounds, it_now_ms() - t0);
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&c.mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(c.buf);
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    alarm(ALARM_S * it_time_scale()); /* the emulated guest runs slower */
    if (a.argc < 1) IT_FAIL("arguments: SCENARIO [ROUNDS]");
    struct plan p = {.name = a.argv[0], .rounds = 10};
    if (strcmp(p.name, "disc_before_est") == 0)
        p.what = DISC_BEFORE_EST;
    else if (strcmp(p.name, "gone_before_accept") == 0)
        p.what = GONE_BEFORE_ACCEPT;
    else if (strcmp(p.name, "gone_before_take") == 0)
        p.what = GONE_BEFORE_TAKE;
    else
        IT_FAIL("unknown scenario %s", p.name);
    if (a.argc >= 2) p.rounds = atoi(a.argv[1]);
    CHECK(p.rounds > 0 && p.rounds <= 250);
    if (a.server)
        server(&a, &p);
    else
        client(&a, &p);
    return 0;
}
