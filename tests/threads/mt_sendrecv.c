/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mt_sendrecv.c -- 6 client threads share one connection; each sends numbered messages of random
 * length and waits for the server's echo. 4 server threads share the server's connection and
 * CQ: whichever takes a receive completion checks the message, echoes it and, once the echo is
 * sent, reposts that receive buffer.
 *
 * Posted receives form an unordered set, so an echo may land in any client thread's buffer: the
 * thread that takes a receive completion hands the echo to the thread named inside it. The
 * client uses an RCQ (receives) besides the CQ (sends); the server one CQ for both.
 *
 * args: [ITERS]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <string.h>

#include "mt.h"

#define CLIENT_THREADS 6
#define SERVER_THREADS 4
#define MSG_MAX 512
#define MSG_MIN 16
#define SLOTS (2 * CLIENT_THREADS)
#define DEF_ITERS 500
#define MAGIC 0x4d545352u

struct msg_head {
    uint32_t magic;
    uint32_t thread;
    uint32_t seq; /* 1, 2, ... for each thread */
    uint32_t len; /* the whole message */
};

static size_t msg_len(uint32_t t, uint32_t seq) {
    return MSG_MIN + mt_rand3(t, seq, 7) % (MSG_MAX - MSG_MIN + 1);
}

static uint64_t msg_seed(uint32_t t, uint32_t seq) {
    return 0x5e000000ULL + ((uint64_t)t << 20) + seq;
}

static void msg_build(char *buf, uint32_t t, uint32_t seq) {
    struct msg_head h = {MAGIC, t, seq, (uint32_t)msg_len(t, seq)};
    memcpy(buf, &h, sizeof(h));
    it_fill(buf + sizeof(h), h.len - sizeof(h), msg_seed(t, seq));
}

/* checks a received message of byte_len bytes and returns its head */
static struct msg_head msg_check(const char *buf, uint32_t byte_len, int threads) {
    struct msg_head h;
    CHECK(byte_len >= sizeof(h));
    memcpy(&h, buf, sizeof(h));
    CHECK_EQ(h.magic, MAGIC);
    CHECK((int)h.thread < threads);
    CHECK_EQ(h.len, msg_len(h.thread, h.seq));
    CHECK_EQ(byte_len, h.len);
    long bad = it_verify(buf + sizeof(h), h.len - sizeof(h), msg_seed(h.thread, h.seq));
    if (bad >= 0) IT_FAIL("message %u/%u differs at byte %ld", h.thread, h.seq, bad);
    return h;
}

#define CTX_RECV(s) ((uint64_t)(s))
#define CTX_SEND(s) ((uint64_t)(s) | (1ULL << 32))

/* ---- server ---- */

static struct rpma_conn *s_conn;
static struct rpma_cq *s_cq;
static int s_cq_fd;
static struct rpma_mr_local *s_rmr, *s_smr;
static char *s_rbuf, *s_sbuf;
static long s_total;
static atomic_long s_echoed, s_sent;
static atomic_uint s_last_seq[CLIENT_THREADS];
static atomic_long s_taken[SERVER_THREADS];

static void s_handle(const struct ibv_wc *wc) {
    int slot = (int)(wc->wr_id & 0xffffffffu);
    CHECK(slot >= 0 && slot < SLOTS);
    bool is_send = (wc->wr_id & (1ULL << 32)) != 0;
    /* once every echo is out the client may close: the receives still posted are flushed */
    if (wc->status == IBV_WC_WR_FLUSH_ERR && !is_send && atomic_load(&s_echoed) == s_total) return;
    if (wc->status != IBV_WC_SUCCESS)
        IT_FAIL("server: wr_id %#llx failed: %s", (unsigned long long)wc->wr_id,
                it_wc_status_str(wc->status));
    if (is_send) {
        CHECK_EQ(wc->opcode, IBV_WC_SEND);
        /* the echo left the buffer: the slot may take the next message, if one is to come */
        if (atomic_load(&s_echoed) < s_total)
            CHECK_OK(rpma_recv(s_conn, s_rmr, (size_t)slot * MSG_MAX, MSG_MAX,
                               (void *)(uintptr_t)CTX_RECV(slot)));
        atomic_fetch_add(&s_sent, 1);
        return;
    }
    CHECK_EQ(wc->opcode, IBV_WC_RECV);
    char *in = s_rbuf + (size_t)slot * MSG_MAX, *out = s_sbuf + (size_t)slot * MSG_MAX;
    struct msg_head h = msg_check(in, wc->byte_len, CLIENT_THREADS);
    /* each client thread sends its next message only after the echo of the last one */
    unsigned prev = atomic_exchange(&s_last_seq[h.thread], h.seq);
    if (h.seq != prev + 1) IT_FAIL("thread %u: message %u after %u", h.thread, h.seq, prev);
    memcpy(out, in, h.len);
    /* counted before it is posted: the client may close as soon as the last echo arrives */
    atomic_fetch_add(&s_echoed, 1);
    CHECK_OK(rpma_send(s_conn, s_smr, (size_t)slot * MSG_MAX, h.len, RPMA_F_COMPLETION_ALWAYS,
                       (void *)(uintptr_t)CTX_SEND(slot)));
}

static void *s_thread(void *arg) {
    int k = *(int *)arg;
    long long deadline = it_now_ms() + 45000;
    while (atomic_load(&s_sent) < s_total) {
        if (it_now_ms() > deadline)
            IT_FAIL("server: %ld of %ld echoes sent in time", atomic_load(&s_sent), s_total);
        struct pollfd p = {.fd = s_cq_fd, .events = POLLIN};
        if (k % 2 == 0 && poll(&p, 1, 2) > 0) {
            int ret = rpma_cq_wait(s_cq);
            if (ret != 0 && ret != RPMA_E_NO_COMPLETION)
                IT_FAIL("rpma_cq_wait returned %d (%s)", ret, rpma_err_2str(ret));
        }
        struct ibv_wc wc[4];
        int got = 0;
        int ret = rpma_cq_get_wc(s_cq, 4, wc, &got);
        if (ret == RPMA_E_NO_COMPLETION) {
            sched_yield();
            continue;
        }
        if (ret) IT_FAIL("rpma_cq_get_wc returned %d (%s)", ret, rpma_err_2str(ret));
        for (int i = 0; i < got; i++) s_handle(&wc[i]);
        atomic_fetch_add(&s_taken[k], got);
    }
    return NULL;
}

static void server(const struct it_args *a) {
    long iters = mt_arg(a, 0, DEF_ITERS);
    s_total = iters * CLIENT_THREADS;
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    s_rbuf = it_alloc(SLOTS * MSG_MAX);
    s_sbuf = it_alloc(SLOTS * MSG_MAX);
    CHECK_OK(rpma_mr_reg(peer, s_rbuf, SLOTS * MSG_MAX, RPMA_MR_USAGE_RECV, &s_rmr));
    CHECK_OK(rpma_mr_reg(peer, s_sbuf, SLOTS * MSG_MAX, RPMA_MR_USAGE_SEND, &s_smr));
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_rq_size(cfg, SLOTS));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, SLOTS));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, 2 * SLOTS));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn_req *req = it_next_req(ep, cfg);
    for (int s = 0; s < SLOTS; s++)
        CHECK_OK(rpma_conn_req_recv(req, s_rmr, (size_t)s * MSG_MAX, MSG_MAX,
                                    (void *)(uintptr_t)CTX_RECV(s)));
    s_conn = it_accept(&req, NULL, 0);
    CHECK_OK(rpma_conn_get_cq(s_conn, &s_cq));
    CHECK_OK(rpma_cq_get_fd(s_cq, &s_cq_fd));
    mt_set_nonblock(s_cq_fd);

    mt_run(SERVER_THREADS, s_thread);
    for (int t = 0; t < CLIENT_THREADS; t++) CHECK_EQ(atomic_load(&s_last_seq[t]), iters);
    CHECK_EQ(atomic_load(&s_echoed), s_total);
    printf("server: %ld messages echoed; completions taken per thread:", s_total);
    for (int k = 0; k < SERVER_THREADS; k++) printf(" %ld", atomic_load(&s_taken[k]));
    printf("\n");

    /* the reposted receives are flushed when the connection closes */
    it_disconnect_passive(&s_conn, false);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&s_rmr));
    CHECK_OK(rpma_mr_dereg(&s_smr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(s_rbuf);
    free(s_sbuf);
}

/* ---- client ---- */

static struct rpma_conn *c_conn;
static struct rpma_cq *c_cq, *c_rcq;
static int c_cq_fd, c_rcq_fd;
static struct rpma_mr_local *c_rmr, *c_smr;
static char *c_rbuf, *c_sbuf;
static atomic_uint c_echo_seen[CLIENT_THREADS]; /* last echo seq that came back */
static atomic_long c_sends_done[CLIENT_THREADS];
static atomic_bool c_slot_free[CLIENT_THREADS];
static atomic_long c_foreign;

static void c_take(int self) {
    struct ibv_wc wc[4];
    int got = 0;
    int ret = rpma_cq_get_wc(c_rcq, 4, wc, &got);
    if (ret != RPMA_E_NO_COMPLETION) {
        if (ret) IT_FAIL("rpma_cq_get_wc(rcq) returned %d (%s)", ret, rpma_err_2str(ret));
        for (int i = 0; i < got; i++) {
            if (wc[i].status != IBV_WC_SUCCESS)
                IT_FAIL("client: receive %llu failed: %s", (unsigned long long)wc[i].wr_id,
                        it_wc_status_str(wc[i].status));
            CHECK_EQ(wc[i].opcode, IBV_WC_RECV);
            int slot = (int)wc[i].wr_id;
            CHECK(slot >= 0 && slot < CLIENT_THREADS);
            struct msg_head h =
                msg_check(c_rbuf + (size_t)slot * MSG_MAX, wc[i].byte_len, CLIENT_THREADS);
            unsigned prev = atomic_exchange(&c_echo_seen[h.thread], h.seq);
            if (h.seq != prev + 1) IT_FAIL("thread %u: echo %u after %u", h.thread, h.seq, prev);
            if ((int)h.thread != self) atomic_fetch_add(&c_foreign, 1);
            atomic_store(&c_slot_free[slot], true);
        }
    }
    ret = rpma_cq_get_wc(c_cq, 4, wc, &got);
    if (ret == RPMA_E_NO_COMPLETION) return;
    if (ret) IT_FAIL("rpma_cq_get_wc(cq) returned %d (%s)", ret, rpma_err_2str(ret));
    for (int i = 0; i < got; i++) {
        if (wc[i].status != IBV_WC_SUCCESS)
            IT_FAIL("client: send %llu failed: %s", (unsigned long long)wc[i].wr_id,
                    it_wc_status_str(wc[i].status));
        CHECK_EQ(wc[i].opcode, IBV_WC_SEND);
        CHECK(wc[i].wr_id < CLIENT_THREADS);
        atomic_fetch_add(&c_sends_done[wc[i].wr_id], 1);
    }
}

static void c_wait(int t, bool (*cond)(int, long), long arg) {
    long long deadline = it_now_ms() + IT_WAIT_MS;
    while (!cond(t, arg)) {
        if (it_now_ms() > deadline)
            IT_FAIL("client thread %d: no progress in %d ms", t, IT_WAIT_MS);
        if (t % 2) {
            struct pollfd p[2] = {{.fd = c_cq_fd, .events = POLLIN},
                                  {.fd = c_rcq_fd, .events = POLLIN}};
            if (poll(p, 2, 2) > 0) {
                for (int k = 0; k < 2; k++) {
                    if (!p[k].revents) continue;
                    int ret = rpma_cq_wait(k ? c_rcq : c_cq);
                    if (ret != 0 && ret != RPMA_E_NO_COMPLETION)
                        IT_FAIL("rpma_cq_wait returned %d (%s)", ret, rpma_err_2str(ret));
                }
            }
        } else {
            sched_yield();
        }
        c_take(t);
    }
}

static bool slot_free(int t, long unused) {
    (void)unused;
    return atomic_load(&c_slot_free[t]);
}

static bool round_done(int t, long seq) {
    return atomic_load(&c_sends_done[t]) == seq && (long)atomic_load(&c_echo_seen[t]) == seq;
}

static long c_iters;

static void *c_thread(void *arg) {
    int t = *(int *)arg;
    char *out = c_sbuf + (size_t)t * MSG_MAX;
    for (uint32_t seq = 1; seq <= (uint32_t)c_iters; seq++) {
        /* this thread's receive buffer must have been filled (by anybody's echo) and read */
        c_wait(t, slot_free, 0);
        atomic_store(&c_slot_free[t], false);
        CHECK_OK(rpma_recv(c_conn, c_rmr, (size_t)t * MSG_MAX, MSG_MAX, (void *)(uintptr_t)t));
        msg_build(out, (uint32_t)t, seq);
        CHECK_OK(rpma_send(c_conn, c_smr, (size_t)t * MSG_MAX, msg_len((uint32_t)t, seq),
                           RPMA_F_COMPLETION_ALWAYS, (void *)(uintptr_t)t));
        c_wait(t, round_done, seq);
    }
    return NULL;
}

static void client(const struct it_args *a) {
    c_iters = mt_arg(a, 0, DEF_ITERS);
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    c_rbuf = it_alloc(CLIENT_THREADS * MSG_MAX);
    c_sbuf = it_alloc(CLIENT_THREADS * MSG_MAX);
    CHECK_OK(rpma_mr_reg(peer, c_rbuf, CLIENT_THREADS * MSG_MAX, RPMA_MR_USAGE_RECV, &c_rmr));
    CHECK_OK(rpma_mr_reg(peer, c_sbuf, CLIENT_THREADS * MSG_MAX, RPMA_MR_USAGE_SEND, &c_smr));
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_rq_size(cfg, CLIENT_THREADS));
    CHECK_OK(rpma_conn_cfg_set_rcq_size(cfg, CLIENT_THREADS));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, CLIENT_THREADS));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, CLIENT_THREADS));
    c_conn = it_connect(peer, a->addr, a->port, cfg, NULL, 0);
    CHECK_OK(rpma_conn_get_cq(c_conn, &c_cq));
    CHECK_OK(rpma_conn_get_rcq(c_conn, &c_rcq));
    CHECK(c_rcq != NULL);
    CHECK_OK(rpma_cq_get_fd(c_cq, &c_cq_fd));
    CHECK_OK(rpma_cq_get_fd(c_rcq, &c_rcq_fd));
    mt_set_nonblock(c_cq_fd);
    mt_set_nonblock(c_rcq_fd);
    for (int t = 0; t < CLIENT_THREADS; t++) atomic_store(&c_slot_free[t], true);

    long long t0 = it_now_ms();
    mt_run(CLIENT_THREADS, c_thread);
    /* every receive was posted for a message and every message was echoed: none is left */
    for (int t = 0; t < CLIENT_THREADS; t++) CHECK(atomic_load(&c_slot_free[t]));
    it_cq_expect_empty(c_cq);
    it_cq_expect_empty(c_rcq);
    printf(
        "client: %d threads x %ld messages echoed and checked, %ld echoes taken by another "
        "thread, %lld ms\n",
        CLIENT_THREADS, c_iters, atomic_load(&c_foreign), it_now_ms() - t0);

    it_disconnect_active(&c_conn);
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&c_rmr));
    CHECK_OK(rpma_mr_dereg(&c_smr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(c_rbuf);
    free(c_sbuf);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
