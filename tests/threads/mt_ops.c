/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mt_ops.c -- 8 threads post writes, flushes (both types), atomic writes and reads to disjoint
 * slices of one remote region, while 2 more threads call getters and cfg setters.
 *
 * mode "shared": all threads share one connection and its CQ. Completions are taken by whichever
 * thread polls first (half the threads spin on rpma_cq_get_wc, half poll the CQ fd and call
 * rpma_cq_wait), so every completion is counted against the thread named in its wr_id.
 * mode "perconn": each thread connects its own connection (conn_req_new/connect and conn_delete
 * under the application's mutex) and the threads run at the same time on one peer and one MR.
 *
 * Each thread reads its slice back after every step and compares it with its own model; the
 * server replays every thread's steps at the end and checks the whole region.
 *
 * args: shared|perconn [ITERS]
 */
#define _GNU_SOURCE
#include <poll.h>
#include <sched.h>
#include <string.h>

#include "mt.h"

#define THREADS 8
#define GETTERS 2
#define SLICE (16 * 1024)
#define REGION (THREADS * SLICE)
#define DEF_ITERS 400
#define PDATA_LEN (IT_MR_DESC_SIZE + IT_PCFG_DESC_SIZE)
#define Q_SIZE 64

enum { OP_WRITE, OP_FLUSH, OP_ATOMIC, OP_READ };
#define CTX(t, i, op) (((uint64_t)(t) << 40) | ((uint64_t)(i) << 8) | (uint64_t)(op))

struct step {
    size_t off, len;
    bool signaled_write; /* else RPMA_F_COMPLETION_ON_ERROR: no completion */
    enum rpma_flush_type flush;
    uint64_t atomic;
};

static void step_of(int t, long i, struct step *s) {
    s->len = 1 + mt_rand3((uint64_t)t, (uint64_t)i, 0) % (SLICE - 8);
    s->off = mt_rand3((uint64_t)t, (uint64_t)i, 1) % (SLICE - 8 - s->len + 1);
    s->signaled_write = i % 3 != 0;
    s->flush = (i & 1) ? RPMA_FLUSH_TYPE_PERSISTENT : RPMA_FLUSH_TYPE_VISIBILITY;
    s->atomic = mt_rand3((uint64_t)t, (uint64_t)i, 2);
}

static uint64_t seed_of(int t, long i) {
    return ((uint64_t)t << 32) | (uint64_t)i;
}

/* applies step i of thread t to a model of its slice */
static void apply(int t, long i, char *slice) {
    struct step s;
    step_of(t, i, &s);
    it_fill(slice + s.off, s.len, seed_of(t, i));
    memcpy(slice + SLICE - 8, &s.atomic, 8);
}

static bool shared_mode(const struct it_args *a) {
    if (a->argc < 1) IT_FAIL("mode (shared|perconn) missing");
    if (strcmp(a->argv[0], "shared") == 0) return true;
    if (strcmp(a->argv[0], "perconn") == 0) return false;
    IT_FAIL("unknown mode %s", a->argv[0]);
}

/* ---- server ---- */

static void server(const struct it_args *a) {
    bool shared = shared_mode(a);
    long iters = mt_arg(a, 1, DEF_ITERS);
    int nconns = shared ? 1 : THREADS;
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *buf = it_alloc(REGION);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, REGION,
                         RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC |
                             RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
                             RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT,
                         &mr));
    struct rpma_peer_cfg *pcfg = NULL;
    CHECK_OK(rpma_peer_cfg_new(&pcfg));
    CHECK_OK(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true));
    char pdata[PDATA_LEN];
    CHECK_OK(rpma_mr_get_descriptor(mr, pdata));
    CHECK_OK(rpma_peer_cfg_get_descriptor(pcfg, pdata + IT_MR_DESC_SIZE));
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, Q_SIZE));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, Q_SIZE));

    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn *conns[THREADS];
    for (int k = 0; k < nconns; k++) {
        struct rpma_conn_req *req = it_next_req(ep, cfg);
        conns[k] = it_accept(&req, pdata, sizeof(pdata));
    }
    for (int k = 0; k < nconns; k++) it_disconnect_passive(&conns[k], false);

    char *model = it_alloc(SLICE);
    for (int t = 0; t < THREADS; t++) {
        memset(model, 0, SLICE);
        for (long i = 0; i < iters; i++) apply(t, i, model);
        if (memcmp(model, buf + (size_t)t * SLICE, SLICE) != 0) {
            size_t k = 0;
            while (model[k] == buf[(size_t)t * SLICE + k]) k++;
            IT_FAIL("slice %d differs from its model at byte %zu", t, k);
        }
    }
    printf("server: %d slices of %d bytes match %ld steps each\n", THREADS, SLICE, iters);
    free(model);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_peer_cfg_delete(&pcfg));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
}

/* ---- client ---- */

static const struct it_args *g_args;
static bool g_shared;
static long g_iters;
static struct rpma_peer *g_peer;
static struct rpma_conn_cfg *g_cfg; /* shared read-only by the getter threads */
static struct rpma_mr_local *g_src_mr, *g_dst_mr;
static char *g_src, *g_dst;
static pthread_mutex_t g_api_lock = PTHREAD_MUTEX_INITIALIZER;
/* the shared connection (shared mode) and what the getters expect of it */
static struct rpma_conn *g_conn;
static struct rpma_cq *g_cq;
static struct rpma_mr_remote *g_remote;
static struct rpma_peer_cfg *g_rpcfg;
static char g_pdata[PDATA_LEN];
static char g_src_desc[IT_MR_DESC_SIZE];
static uint32_t g_qp_num;
static int g_event_fd, g_cq_fd;

static atomic_long g_done[THREADS]; /* completions counted for each thread */
static atomic_long g_cur[THREADS];  /* the step each thread is in */
static atomic_long g_foreign;       /* completions taken by a thread other than their owner */
static atomic_long g_getter_calls;
static atomic_int g_running;

static enum ibv_wc_opcode opcode_of(int op) {
    return (op == OP_WRITE || op == OP_ATOMIC) ? IBV_WC_RDMA_WRITE : IBV_WC_RDMA_READ;
}

/* takes what the CQ holds now and counts it for its owners; returns how many */
static int take(struct rpma_cq *cq, int self) {
    struct ibv_wc wc[8];
    int got = 0;
    int ret = rpma_cq_get_wc(cq, 8, wc, &got);
    if (ret == RPMA_E_NO_COMPLETION) return 0;
    if (ret) IT_FAIL("rpma_cq_get_wc returned %d (%s)", ret, rpma_err_2str(ret));
    CHECK(got >= 1 && got <= 8);
    for (int k = 0; k < got; k++) {
        if (wc[k].status != IBV_WC_SUCCESS)
            IT_FAIL("wr_id %#llx failed: %s", (unsigned long long)wc[k].wr_id,
                    it_wc_status_str(wc[k].status));
        int t = (int)(wc[k].wr_id >> 40);
        long i = (long)((wc[k].wr_id >> 8) & 0xffffffffu);
        int op = (int)(wc[k].wr_id & 0xff);
        CHECK(t >= 0 && t < THREADS && op <= OP_READ);
        if (i != atomic_load(&g_cur[t]))
            IT_FAIL("thread %d got a completion of step %ld in step %ld", t, i,
                    atomic_load(&g_cur[t]));
        if (wc[k].opcode != opcode_of(op))
            IT_FAIL("wr_id %#llx: opcode %d, expected %d", (unsigned long long)wc[k].wr_id,
                    (int)wc[k].opcode, (int)opcode_of(op));
        if (t != self) atomic_fetch_add(&g_foreign, 1);
        atomic_fetch_add(&g_done[t], 1);
    }
    return got;
}

/* waits until thread t's completions reach want, taking anybody's on the way */
static void wait_done(int t, struct rpma_cq *cq, int cq_fd, long want) {
    long long deadline = it_now_ms() + IT_WAIT_MS;
    bool spin = t % 2 == 0;
    while (atomic_load(&g_done[t]) < want) {
        if (it_now_ms() > deadline)
            IT_FAIL("thread %d: %ld of %ld completions within %d ms", t, atomic_load(&g_done[t]),
                    want, IT_WAIT_MS);
        if (spin) {
            if (take(cq, t) == 0) sched_yield();
            continue;
        }
        struct pollfd p = {.fd = cq_fd, .events = POLLIN};
        if (poll(&p, 1, 2) > 0) {
            int ret = rpma_cq_wait(cq);
            if (ret != 0 && ret != RPMA_E_NO_COMPLETION)
                IT_FAIL("rpma_cq_wait returned %d (%s)", ret, rpma_err_2str(ret));
        }
        while (take(cq, t) > 0) {
        }
    }
}

static struct rpma_conn *connect_one(struct rpma_mr_remote **remote) {
    pthread_mutex_lock(&g_api_lock);
    struct rpma_conn_req *req = NULL;
    CHECK_OK(rpma_conn_req_new(g_peer, g_args->addr, g_args->port, g_cfg, &req));
    struct rpma_conn *conn = NULL;
    CHECK_OK(rpma_conn_req_connect(&req, NULL, &conn));
    pthread_mutex_unlock(&g_api_lock);
    it_expect_event(conn, RPMA_CONN_ESTABLISHED);
    *remote = it_remote_mr(conn, 0);
    it_apply_remote_pcfg(conn, IT_MR_DESC_SIZE);
    return conn;
}

static void *op_thread(void *arg) {
    int t = *(int *)arg;
    struct rpma_conn *conn = g_conn;
    struct rpma_mr_remote *remote = g_remote;
    struct rpma_cq *cq = g_cq;
    int cq_fd = g_cq_fd;
    if (!g_shared) {
        conn = connect_one(&remote);
        CHECK_OK(rpma_conn_get_cq(conn, &cq));
        CHECK_OK(rpma_cq_get_fd(cq, &cq_fd));
        mt_set_nonblock(cq_fd);
    }
    char *src = g_src + (size_t)t * SLICE, *dst = g_dst + (size_t)t * SLICE;
    size_t base = (size_t)t * SLICE;
    char *model = it_alloc(SLICE);
    long want = 0;
    for (long i = 0; i < g_iters; i++) {
        struct step s;
        step_of(t, i, &s);
        atomic_store(&g_cur[t], i);
        it_fill(src + s.off, s.len, seed_of(t, i));
        uint64_t aval = s.atomic;
        CHECK_OK(
            rpma_write(conn, remote, base + s.off, g_src_mr, base + s.off, s.len,
                       s.signaled_write ? RPMA_F_COMPLETION_ALWAYS : RPMA_F_COMPLETION_ON_ERROR,
                       (void *)(uintptr_t)CTX(t, i, OP_WRITE)));
        CHECK_OK(rpma_flush(conn, remote, base + s.off, s.len, s.flush, RPMA_F_COMPLETION_ALWAYS,
                            (void *)(uintptr_t)CTX(t, i, OP_FLUSH)));
        CHECK_OK(rpma_atomic_write(conn, remote, base + SLICE - 8, (const char *)&aval,
                                   RPMA_F_COMPLETION_ALWAYS,
                                   (void *)(uintptr_t)CTX(t, i, OP_ATOMIC)));
        CHECK_OK(rpma_read(conn, g_dst_mr, base, remote, base, SLICE, RPMA_F_COMPLETION_ALWAYS,
                           (void *)(uintptr_t)CTX(t, i, OP_READ)));
        want += s.signaled_write ? 4 : 3;
        wait_done(t, cq, cq_fd, want);
        apply(t, i, model);
        if (memcmp(model, dst, SLICE) != 0) {
            size_t k = 0;
            while (model[k] == dst[k]) k++;
            IT_FAIL("thread %d step %ld: slice read back differs at byte %zu", t, i, k);
        }
    }
    free(model);
    if (!g_shared) {
        CHECK_OK(rpma_mr_remote_delete(&remote));
        CHECK_OK(rpma_conn_disconnect(conn));
        it_expect_event(conn, RPMA_CONN_CLOSED);
        /* conn_delete on distinct connections needs no lock */
        CHECK_OK(rpma_conn_delete(&conn));
    }
    return NULL;
}

/* getters on the shared objects and setters on the thread's own cfg, while operations run */
static void *getter_thread(void *arg) {
    int g = *(int *)arg;
    long calls = 0;
    while (atomic_load(&g_running) > 0 || calls == 0) {
        if (g_shared) {
            uint32_t qp = 0;
            CHECK_OK(rpma_conn_get_qp_num(g_conn, &qp));
            CHECK_EQ(qp, g_qp_num);
            struct rpma_cq *cq = NULL, *rcq = (struct rpma_cq *)1;
            CHECK_OK(rpma_conn_get_cq(g_conn, &cq));
            CHECK(cq == g_cq);
            CHECK_OK(rpma_conn_get_rcq(g_conn, &rcq));
            CHECK(rcq == NULL);
            int fd = -1;
            CHECK_OK(rpma_conn_get_event_fd(g_conn, &fd));
            CHECK_EQ(fd, g_event_fd);
            CHECK_ERR(rpma_conn_get_compl_fd(g_conn, &fd), RPMA_E_NOT_SHARED_CHNL);
            CHECK_OK(rpma_cq_get_fd(g_cq, &fd));
            CHECK_EQ(fd, g_cq_fd);
            struct rpma_conn_private_data pd = {0};
            CHECK_OK(rpma_conn_get_private_data(g_conn, &pd));
            CHECK(pd.len == IT_PDATA_ACCEPT && memcmp(pd.ptr, g_pdata, PDATA_LEN) == 0);
            size_t size = 0;
            CHECK_OK(rpma_mr_remote_get_size(g_remote, &size));
            CHECK_EQ(size, REGION);
            int ft = 0;
            CHECK_OK(rpma_mr_remote_get_flush_type(g_remote, &ft));
            CHECK_EQ(ft, RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
            bool direct = false;
            CHECK_OK(rpma_peer_cfg_get_direct_write_to_pmem(g_rpcfg, &direct));
            CHECK(direct);
            calls += 10;
        }
        char desc[IT_MR_DESC_SIZE];
        size_t dsize = 0;
        CHECK_OK(rpma_mr_get_descriptor_size(g_src_mr, &dsize));
        CHECK_EQ(dsize, IT_MR_DESC_SIZE);
        CHECK_OK(rpma_mr_get_descriptor(g_src_mr, desc));
        CHECK(memcmp(desc, g_src_desc, sizeof(desc)) == 0);
        void *ptr = NULL;
        CHECK_OK(rpma_mr_get_ptr(g_src_mr, &ptr));
        CHECK(ptr == g_src);
        size_t msize = 0;
        CHECK_OK(rpma_mr_get_size(g_dst_mr, &msize));
        CHECK_EQ(msize, REGION);
        uint32_t q = 0;
        CHECK_OK(rpma_conn_cfg_get_sq_size(g_cfg, &q));
        CHECK_EQ(q, Q_SIZE);
        int timeout = 0;
        CHECK_OK(rpma_conn_cfg_get_timeout(g_cfg, &timeout));
        CHECK_EQ(timeout, RPMA_DEFAULT_TIMEOUT_MS);
        /* setters on a cfg of this thread's own */
        struct rpma_conn_cfg *own = NULL;
        CHECK_OK(rpma_conn_cfg_new(&own));
        uint32_t v = (uint32_t)(g * 1000 + calls % 997 + 1);
        CHECK_OK(rpma_conn_cfg_set_cq_size(own, v));
        CHECK_OK(rpma_conn_cfg_set_rq_size(own, v + 1));
        CHECK_OK(rpma_conn_cfg_set_timeout(own, (int)v));
        CHECK_OK(rpma_conn_cfg_get_cq_size(own, &q));
        CHECK_EQ(q, v);
        CHECK_OK(rpma_conn_cfg_get_rq_size(own, &q));
        CHECK_EQ(q, v + 1);
        CHECK_OK(rpma_conn_cfg_delete(&own));
        struct rpma_peer_cfg *opc = NULL;
        CHECK_OK(rpma_peer_cfg_new(&opc));
        CHECK_OK(rpma_peer_cfg_set_direct_write_to_pmem(opc, calls & 1));
        bool d = false;
        CHECK_OK(rpma_peer_cfg_get_direct_write_to_pmem(opc, &d));
        CHECK_EQ(d, calls & 1);
        CHECK_OK(rpma_peer_cfg_delete(&opc));
        CHECK(strlen(rpma_err_2str(RPMA_E_NO_COMPLETION)) > 0);
        CHECK(strlen(rpma_utils_conn_event_2str(RPMA_CONN_CLOSED)) > 0);
        CHECK_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &(enum rpma_log_level){0}), 0);
        calls += 20;
        sched_yield();
    }
    atomic_fetch_add(&g_getter_calls, calls);
    return NULL;
}

static void *op_thread_counted(void *arg) {
    op_thread(arg);
    atomic_fetch_sub(&g_running, 1);
    return NULL;
}

static void client(const struct it_args *a) {
    g_args = a;
    g_shared = shared_mode(a);
    g_iters = mt_arg(a, 1, DEF_ITERS);
    g_peer = it_peer_new(a->addr, false);
    g_src = it_alloc(REGION);
    g_dst = it_alloc(REGION);
    CHECK_OK(rpma_mr_reg(g_peer, g_src, REGION, RPMA_MR_USAGE_WRITE_SRC, &g_src_mr));
    CHECK_OK(rpma_mr_reg(g_peer, g_dst, REGION, RPMA_MR_USAGE_READ_DST, &g_dst_mr));
    CHECK_OK(rpma_mr_get_descriptor(g_src_mr, g_src_desc));
    CHECK_OK(rpma_conn_cfg_new(&g_cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(g_cfg, Q_SIZE));
    CHECK_OK(rpma_conn_cfg_set_cq_size(g_cfg, Q_SIZE));

    if (g_shared) {
        g_conn = it_connect(g_peer, a->addr, a->port, g_cfg, NULL, 0);
        g_remote = it_remote_mr(g_conn, 0);
        it_apply_remote_pcfg(g_conn, IT_MR_DESC_SIZE);
        struct rpma_conn_private_data pd = {0};
        CHECK_OK(rpma_conn_get_private_data(g_conn, &pd));
        CHECK_EQ(pd.len, IT_PDATA_ACCEPT);
        memcpy(g_pdata, pd.ptr, PDATA_LEN);
        CHECK_OK(
            rpma_peer_cfg_from_descriptor(g_pdata + IT_MR_DESC_SIZE, IT_PCFG_DESC_SIZE, &g_rpcfg));
        CHECK_OK(rpma_conn_get_qp_num(g_conn, &g_qp_num));
        CHECK_OK(rpma_conn_get_event_fd(g_conn, &g_event_fd));
        CHECK_OK(rpma_conn_get_cq(g_conn, &g_cq));
        CHECK_OK(rpma_cq_get_fd(g_cq, &g_cq_fd));
        mt_set_nonblock(g_cq_fd);
    }

    pthread_t th[THREADS], gth[GETTERS];
    int ids[THREADS], gids[GETTERS];
    for (int k = 0; k < THREADS; k++) ids[k] = k;
    for (int k = 0; k < GETTERS; k++) gids[k] = k;
    atomic_store(&g_running, THREADS);
    long long t0 = it_now_ms();
    mt_start(gth, GETTERS, getter_thread, gids, sizeof(int));
    mt_start(th, THREADS, op_thread_counted, ids, sizeof(int));
    mt_join(th, THREADS);
    mt_join(gth, GETTERS);
    long long t1 = it_now_ms();

    long total = 0;
    for (int k = 0; k < THREADS; k++) total += atomic_load(&g_done[k]);
    if (g_shared) it_cq_expect_empty(g_cq);
    printf(
        "client (%s): %d threads x %ld steps, %ld completions (%ld taken by another thread), "
        "%ld getter calls, %lld ms\n",
        g_shared ? "shared connection" : "one connection each", THREADS, g_iters, total,
        atomic_load(&g_foreign), atomic_load(&g_getter_calls), t1 - t0);
    CHECK(atomic_load(&g_getter_calls) > 0);

    if (g_shared) {
        CHECK_OK(rpma_peer_cfg_delete(&g_rpcfg));
        CHECK_OK(rpma_mr_remote_delete(&g_remote));
        it_disconnect_active(&g_conn);
    }
    CHECK_OK(rpma_conn_cfg_delete(&g_cfg));
    CHECK_OK(rpma_mr_dereg(&g_src_mr));
    CHECK_OK(rpma_mr_dereg(&g_dst_mr));
    CHECK_OK(rpma_peer_delete(&g_peer));
    free(g_src);
    free(g_dst);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
