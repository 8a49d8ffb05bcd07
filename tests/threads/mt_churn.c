/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mt_churn.c -- connection churn from several threads at once. Each of 4 client threads
 * repeatedly connects, writes its own slot of the server's region, reads it back and checks it,
 * disconnects and deletes the connection. 4 server threads take requests from one endpoint,
 * accept them, wait for the client to close, delete the connection and check the slot.
 *
 * As an application must, both sides serialise the calls that are not thread-safe
 * (conn_req_new/connect/delete, ep_*) with a mutex; everything else runs concurrently.
 *
 * args: [ITERS per client thread]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "mt.h"

#define CLIENT_THREADS 4
#define SERVER_THREADS 4
#define SLOT 4096
#define DEF_ITERS 50
#define MAX_ITERS 1000

struct hello {
    uint16_t thread;
    uint16_t iter;
};

static uint64_t slot_seed(int t, int i) {
    return 0xc4000000ULL + ((uint64_t)t << 16) + (uint64_t)i;
}

static pthread_mutex_t g_api_lock = PTHREAD_MUTEX_INITIALIZER;
static long g_iters;

/* ---- server ---- */

static struct rpma_ep *s_ep;
static int s_ep_fd;
static char *s_buf;
static char s_pdata[IT_MR_DESC_SIZE];
static atomic_long s_accepted, s_checked;
static atomic_uchar *s_seen;

/* the next request, or NULL once every expected one was taken; h: its private data */
static struct rpma_conn_req *s_next_req(long total, struct hello *h) {
    struct rpma_conn_req *req = mt_next_req(s_ep, s_ep_fd, NULL, &s_accepted, total, &g_api_lock);
    if (!req) return NULL;
    struct rpma_conn_private_data pd = {0};
    CHECK_OK(rpma_conn_req_get_private_data(req, &pd));
    CHECK_EQ(pd.len, IT_PDATA_CONNECT);
    memcpy(h, pd.ptr, sizeof(*h));
    return req;
}

static void *s_thread(void *arg) {
    (void)arg;
    long total = g_iters * CLIENT_THREADS;
    struct hello h;
    struct rpma_conn_req *req;
    while ((req = s_next_req(total, &h)) != NULL) {
        CHECK(h.thread < CLIENT_THREADS && h.iter < g_iters);
        size_t idx = (size_t)h.thread * (size_t)g_iters + h.iter;
        if (atomic_exchange(&s_seen[idx], 1)) IT_FAIL("request %u/%u came twice", h.thread, h.iter);
        struct rpma_conn_private_data pd = {.ptr = s_pdata, .len = sizeof(s_pdata)};
        struct rpma_conn *conn = NULL;
        pthread_mutex_lock(&g_api_lock);
        CHECK_OK(rpma_conn_req_connect(&req, &pd, &conn));
        pthread_mutex_unlock(&g_api_lock);
        it_expect_accepted(conn);
        /* the client writes, reads back and then disconnects */
        it_expect_event(conn, RPMA_CONN_CLOSED);
        CHECK_OK(rpma_conn_disconnect(conn));
        CHECK_OK(rpma_conn_delete(&conn));
        long bad = it_verify(s_buf + idx * SLOT, SLOT, slot_seed(h.thread, h.iter));
        if (bad >= 0) IT_FAIL("slot %u/%u differs at byte %ld", h.thread, h.iter, bad);
        atomic_fetch_add(&s_checked, 1);
    }
    return NULL;
}

static void server(const struct it_args *a) {
    g_iters = mt_arg(a, 0, DEF_ITERS);
    CHECK(g_iters <= MAX_ITERS);
    size_t region = (size_t)CLIENT_THREADS * (size_t)g_iters * SLOT;
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    s_buf = it_alloc(region);
    s_seen = calloc((size_t)CLIENT_THREADS * (size_t)g_iters, 1);
    CHECK(s_seen != NULL);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(
        rpma_mr_reg(peer, s_buf, region, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC, &mr));
    CHECK_OK(rpma_mr_get_descriptor(mr, s_pdata));
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &s_ep));
    CHECK_OK(rpma_ep_get_fd(s_ep, &s_ep_fd));
    mt_set_nonblock(s_ep_fd);
    it_ready();

    mt_run(SERVER_THREADS, s_thread);
    CHECK_EQ(atomic_load(&s_checked), CLIENT_THREADS * g_iters);
    for (long k = 0; k < CLIENT_THREADS * g_iters; k++)
        CHECK_EQ(it_verify(s_buf + (size_t)k * SLOT, SLOT,
                           slot_seed((int)(k / g_iters), (int)(k % g_iters))),
                 -1);
    printf("server: %ld connections accepted, closed and their slots checked\n",
           atomic_load(&s_checked));
    CHECK_OK(rpma_ep_shutdown(&s_ep));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(s_buf);
    free((void *)s_seen);
}

/* ---- client ---- */

static const struct it_args *c_args;
static struct rpma_peer *c_peer;
static char *c_src, *c_dst;
static struct rpma_mr_local *c_src_mr, *c_dst_mr;

static void *c_thread(void *arg) {
    int t = *(int *)arg;
    size_t lo = (size_t)t * SLOT;
    for (int i = 0; i < g_iters; i++) {
        struct hello h = {(uint16_t)t, (uint16_t)i};
        struct rpma_conn_private_data pd = {.ptr = &h, .len = sizeof(h)};
        struct rpma_conn_req *req = NULL;
        struct rpma_conn *conn = NULL;
        pthread_mutex_lock(&g_api_lock);
        CHECK_OK(rpma_conn_req_new(c_peer, c_args->addr, c_args->port, NULL, &req));
        CHECK_OK(rpma_conn_req_connect(&req, &pd, &conn));
        pthread_mutex_unlock(&g_api_lock);
        it_expect_event(conn, RPMA_CONN_ESTABLISHED);
        struct rpma_mr_remote *remote = it_remote_mr(conn, 0);
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conn, &cq));

        size_t ro = ((size_t)t * (size_t)g_iters + (size_t)i) * SLOT;
        it_fill(c_src + lo, SLOT, slot_seed(t, i));
        memset(c_dst + lo, 0, SLOT);
        CHECK_OK(
            rpma_write(conn, remote, ro, c_src_mr, lo, SLOT, RPMA_F_COMPLETION_ON_ERROR, NULL));
        CHECK_OK(rpma_read(conn, c_dst_mr, lo, remote, ro, SLOT, RPMA_F_COMPLETION_ALWAYS,
                           (void *)(uintptr_t)(i + 1)));
        it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)(uintptr_t)(i + 1));
        long bad = it_verify(c_dst + lo, SLOT, slot_seed(t, i));
        if (bad >= 0) IT_FAIL("thread %d iteration %d: read back differs at byte %ld", t, i, bad);

        CHECK_OK(rpma_mr_remote_delete(&remote));
        CHECK_OK(rpma_conn_disconnect(conn));
        it_expect_event(conn, RPMA_CONN_CLOSED);
        CHECK_OK(rpma_conn_delete(&conn));
    }
    return NULL;
}

static void client(const struct it_args *a) {
    c_args = a;
    g_iters = mt_arg(a, 0, DEF_ITERS);
    c_peer = it_peer_new(a->addr, false);
    c_src = it_alloc(CLIENT_THREADS * SLOT);
    c_dst = it_alloc(CLIENT_THREADS * SLOT);
    CHECK_OK(rpma_mr_reg(c_peer, c_src, CLIENT_THREADS * SLOT, RPMA_MR_USAGE_WRITE_SRC, &c_src_mr));
    CHECK_OK(rpma_mr_reg(c_peer, c_dst, CLIENT_THREADS * SLOT, RPMA_MR_USAGE_READ_DST, &c_dst_mr));
    long long t0 = it_now_ms();
    mt_run(CLIENT_THREADS, c_thread);
    printf("client: %d threads x %ld connect/write/read/verify/disconnect cycles, %lld ms\n",
           CLIENT_THREADS, g_iters, it_now_ms() - t0);
    CHECK_OK(rpma_mr_dereg(&c_src_mr));
    CHECK_OK(rpma_mr_dereg(&c_dst_mr));
    /* every connection is gone: the peer must be deletable */
    CHECK_OK(rpma_peer_delete(&c_peer));
    free(c_src);
    free(c_dst);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
