/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mt_srq.c -- connections that come and go while they wait on one shared receive queue. 4 client
 * threads repeatedly connect, send 2 numbered messages and wait for both to complete; every other
 * connection then sends a third ("maybe") message and disconnects at once, before the server can
 * have received it. 4 server threads accept with the SRQ in the cfg, wait for CLOSED and delete.
 * One more server thread keeps at most 2 receives posted on the SRQ, so most sends wait for one
 * (RNR), and takes the completions from its RCQ.
 *
 * Checked: every message whose send completed is received exactly once, intact; a "maybe" message
 * at most once, intact; nothing else arrives; every connection gets CLOSED on both sides (a side
 * whose send waits at the peer when it disconnects, too).
 *
 * As an application must, both sides serialise the calls that are not thread-safe
 * (conn_req_new/connect/delete, ep_*) with a mutex; everything else runs concurrently.
 *
 * args: [ITERS per client thread]
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "mt.h"

#define CLIENT_THREADS 4
#define SERVER_THREADS 4
#define SURE 2   /* messages per connection whose completion the client waits for */
#define POSTED 2 /* receives the server keeps posted at most */
#define MSG 64
#define DEF_ITERS 30
#define MAX_ITERS 1000

struct hello {
    uint16_t thread;
    uint16_t iter;
};

/* message k (0..SURE: SURE is the "maybe") of connection (t, i) */
static uint64_t msg_seed(int t, int i, int k) {
    return 0x5a000000ULL + ((uint64_t)t << 20) + ((uint64_t)i << 4) + (uint64_t)k;
}

static pthread_mutex_t g_api_lock = PTHREAD_MUTEX_INITIALIZER;
static long g_iters;

/* ---- server ---- */

static struct rpma_ep *s_ep;
static int s_ep_fd;
static struct rpma_srq *s_srq;
static struct rpma_conn_cfg *s_cfg;
static atomic_long s_accepted, s_closed;
/* per message: how often it arrived */
static atomic_uchar *s_seen;

static size_t msg_index(int t, int i, int k) {
    return ((size_t)t * (size_t)g_iters + (size_t)i) * (SURE + 1) + (size_t)k;
}

static void *s_conn_thread(void *arg) {
    (void)arg;
    long total = g_iters * CLIENT_THREADS;
    struct rpma_conn_req *req;
    while ((req = mt_next_req(s_ep, s_ep_fd, s_cfg, &s_accepted, total, &g_api_lock)) != NULL) {
        struct rpma_conn *conn = NULL;
        pthread_mutex_lock(&g_api_lock);
        CHECK_OK(rpma_conn_req_connect(&req, NULL, &conn));
        pthread_mutex_unlock(&g_api_lock);
        it_expect_accepted(conn);
        it_expect_event(conn, RPMA_CONN_CLOSED);
        CHECK_OK(rpma_conn_disconnect(conn));
        pthread_mutex_lock(&g_api_lock);
        CHECK_OK(rpma_conn_delete(&conn));
        pthread_mutex_unlock(&g_api_lock);
        atomic_fetch_add(&s_closed, 1);
    }
    return NULL;
}

/* keeps at most POSTED receives on the SRQ and checks what arrives, until every connection is
 * closed and every sure message came */
static void *s_recv_thread(void *arg) {
    (void)arg;
    struct rpma_peer *peer = arg;
    char *buf = it_alloc(POSTED * MSG);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, POSTED * MSG, RPMA_MR_USAGE_RECV, &mr));
    struct rpma_cq *rcq = NULL;
    CHECK_OK(rpma_srq_get_rcq(s_srq, &rcq));
    for (uintptr_t s = 0; s < POSTED; s++)
        CHECK_OK(rpma_srq_recv(s_srq, mr, s * MSG, MSG, (void *)s));
    long sure_total = g_iters * CLIENT_THREADS * SURE, sure = 0;
    long long deadline = it_now_ms() + 90000;
    while (sure < sure_total || atomic_load(&s_closed) < g_iters * CLIENT_THREADS) {
        if (it_now_ms() > deadline)
            IT_FAIL("server: %ld of %ld sure messages and %ld of %ld connections closed in 90 s",
                    sure, sure_total, atomic_load(&s_closed), g_iters * CLIENT_THREADS);
        struct ibv_wc wc;
        int got = 0;
        int ret = rpma_cq_get_wc(rcq, 1, &wc, &got);
        if (ret == RPMA_E_NO_COMPLETION) {
            usleep(100);
            continue;
        }
        if (ret) IT_FAIL("rpma_cq_get_wc returned %d (%s)", ret, rpma_err_2str(ret));
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.byte_len != MSG)
            IT_FAIL("a receive completed with status %d, opcode %d, %u bytes", (int)wc.status,
                    (int)wc.opcode, wc.byte_len);
        uintptr_t slot = (uintptr_t)wc.wr_id;
        CHECK(slot < POSTED);
        char *m = buf + slot * MSG;
        int t, i, k;
        memcpy(&t, m, sizeof(t));
        memcpy(&i, m + 4, sizeof(i));
        memcpy(&k, m + 8, sizeof(k));
        if (t < 0 || t >= CLIENT_THREADS || i < 0 || i >= g_iters || k < 0 || k > SURE)
            IT_FAIL("a message names connection %d/%d, message %d: none such", t, i, k);
        long bad = it_verify(m + 16, MSG - 16, msg_seed(t, i, k));
        if (bad >= 0) IT_FAIL("message %d of %d/%d differs at byte %ld", k, t, i, bad + 16);
        if (atomic_fetch_add(&s_seen[msg_index(t, i, k)], 1))
            IT_FAIL("message %d of %d/%d came twice", k, t, i);
        if (k < SURE) sure++;
        memset(m, 0, MSG);
        CHECK_OK(rpma_srq_recv(s_srq, mr, slot * MSG, MSG, (void *)slot));
    }
    CHECK_OK(rpma_mr_dereg(&mr)); /* the receives still posted are the SRQ's to drop */
    free(buf);
    return NULL;
}

static void server(const struct it_args *a) {
    g_iters = mt_arg(a, 0, DEF_ITERS);
    CHECK(g_iters > 0 && g_iters <= MAX_ITERS);
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    size_t msgs = (size_t)CLIENT_THREADS * (size_t)g_iters * (SURE + 1);
    s_seen = calloc(msgs, 1);
    CHECK(s_seen != NULL);
    struct rpma_srq_cfg *scfg = NULL;
    CHECK_OK(rpma_srq_cfg_new(&scfg));
    CHECK_OK(rpma_srq_cfg_set_rq_size(scfg, POSTED));
    CHECK_OK(rpma_srq_cfg_set_rcq_size(scfg, (uint32_t)msgs));
    CHECK_OK(rpma_srq_new(peer, scfg, &s_srq));
    CHECK_OK(rpma_conn_cfg_new(&s_cfg));
    CHECK_OK(rpma_conn_cfg_set_srq(s_cfg, s_srq));
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &s_ep));
    CHECK_OK(rpma_ep_get_fd(s_ep, &s_ep_fd));
    mt_set_nonblock(s_ep_fd);
    it_ready();

    pthread_t rt;
    if (pthread_create(&rt, NULL, s_recv_thread, peer) != 0) IT_FAIL("pthread_create failed");
    mt_run(SERVER_THREADS, s_conn_thread);
    mt_join(&rt, 1);
    long maybe = 0;
    for (int t = 0; t < CLIENT_THREADS; t++)
        for (int i = 0; i < g_iters; i++)
            for (int k = 0; k <= SURE; k++) {
                unsigned char n = atomic_load(&s_seen[msg_index(t, i, k)]);
                if (k < SURE && n != 1)
                    IT_FAIL("sure message %d of %d/%d came %u times", k, t, i, n);
                if (k == SURE) {
                    if (i % 2 == 0 && n) IT_FAIL("%d/%d sent no maybe message, yet one came", t, i);
                    maybe += n;
                }
            }
    printf(
        "server: %ld connections on one SRQ, %ld sure messages once each, %ld of %ld maybe "
        "messages\n",
        atomic_load(&s_closed), g_iters * CLIENT_THREADS * SURE, maybe,
        g_iters * CLIENT_THREADS / 2);
    CHECK_OK(rpma_ep_shutdown(&s_ep));
    CHECK_OK(rpma_conn_cfg_delete(&s_cfg));
    CHECK_OK(rpma_srq_delete(&s_srq));
    CHECK_OK(rpma_srq_cfg_delete(&scfg));
    CHECK_OK(rpma_peer_delete(&peer));
    free((void *)s_seen);
}

/* ---- client ---- */

static const struct it_args *c_args;
static struct rpma_peer *c_peer;
static char *c_buf;
static struct rpma_mr_local *c_mr;

static void *c_thread(void *arg) {
    int t = *(int *)arg;
    char *mine = c_buf + (size_t)t * (SURE + 1) * MSG;
    size_t lo = (size_t)t * (SURE + 1) * MSG;
    for (int i = 0; i < g_iters; i++) {
        struct rpma_conn_req *req = NULL;
        struct rpma_conn *conn = NULL;
        struct rpma_conn_cfg *cfg = NULL;
        CHECK_OK(rpma_conn_cfg_new(&cfg));
        CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, SURE + 1));
        CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, SURE + 1));
        pthread_mutex_lock(&g_api_lock);
        CHECK_OK(rpma_conn_req_new(c_peer, c_args->addr, c_args->port, cfg, &req));
        CHECK_OK(rpma_conn_req_connect(&req, NULL, &conn));
        pthread_mutex_unlock(&g_api_lock);
        CHECK_OK(rpma_conn_cfg_delete(&cfg));
        it_expect_event(conn, RPMA_CONN_ESTABLISHED);
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conn, &cq));
        bool maybe = i % 2 == 1;
        for (int k = 0; k < SURE + maybe; k++) {
            char *m = mine + (size_t)k * MSG;
            memcpy(m, &t, sizeof(t));
            memcpy(m + 4, &i, sizeof(i));
            memcpy(m + 8, &k, sizeof(k));
            it_fill(m + 16, MSG - 16, msg_seed(t, i, k));
            CHECK_OK(rpma_send(conn, c_mr, lo + (size_t)k * MSG, MSG, RPMA_F_COMPLETION_ALWAYS,
                               (void *)(uintptr_t)(k + 1)));
        }
        /* the sure ones complete, in order, as the server's receives come */
        for (int k = 0; k < SURE; k++) it_cq_expect(cq, IBV_WC_SEND, (void *)(uintptr_t)(k + 1));
        /* the maybe one waits for a receive, most likely, when this side disconnects */
        CHECK_OK(rpma_conn_disconnect(conn));
        it_expect_event(conn, RPMA_CONN_CLOSED);
        if (maybe) {
            struct ibv_wc wc;
            it_cq_get(cq, &wc);
            CHECK(wc.wr_id == SURE + 1);
            CHECK(wc.status == IBV_WC_SUCCESS || wc.status == IBV_WC_WR_FLUSH_ERR);
        }
        pthread_mutex_lock(&g_api_lock);
        CHECK_OK(rpma_conn_delete(&conn));
        pthread_mutex_unlock(&g_api_lock);
    }
    return NULL;
}

static void client(const struct it_args *a) {
    c_args = a;
    g_iters = mt_arg(a, 0, DEF_ITERS);
    c_peer = it_peer_new(a->addr, false);
    size_t size = (size_t)CLIENT_THREADS * (SURE + 1) * MSG;
    c_buf = it_alloc(size);
    CHECK_OK(rpma_mr_reg(c_peer, c_buf, size, RPMA_MR_USAGE_SEND, &c_mr));
    long long t0 = it_now_ms();
    mt_run(CLIENT_THREADS, c_thread);
    printf(
        "client: %d threads x %ld connections, each %d sends through the server's SRQ, %lld ms\n",
        CLIENT_THREADS, g_iters, SURE, it_now_ms() - t0);
    CHECK_OK(rpma_mr_dereg(&c_mr));
    CHECK_OK(rpma_peer_delete(&c_peer));
    free(c_buf);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
