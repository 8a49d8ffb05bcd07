/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * load.c -- many concurrent connections from one client process to one server process.
 *
 * Both processes raise RLIMIT_NOFILE to the hard limit. The client opens N connections (in
 * batches, all held open at once); both sides then measure their resident memory (VmRSS of
 * /proc/self/status) and open descriptors against a baseline taken before the first connection,
 * with every buffer already registered and touched, so the difference is what the idle
 * connections cost. The server sends its numbers to the client over connection 0. Then every
 * connection writes its own slice of the server's region and reads it back; the client checks
 * every slice, and the server checks them all after the connections closed.
 *
 * args: N [MAX_KIB]  -- with MAX_KIB, more than that many KiB per idle connection on either
 *                      side fails the test
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common.h"

#define SLICE 256
#define BATCH 100
#define MAX_CONNS 8000
/* the whole run's backstop; the runner's own limit is RPMA_IT_TIMEOUT */
#define LOAD_ALARM_S 600

struct mem_report {
    uint64_t rss_before_kib;
    uint64_t rss_after_kib;
    uint64_t fds_before;
    uint64_t fds_after;
    uint64_t threads_after;
};

static uint64_t seed(int j) {
    return 0x10ad0000ULL + (uint64_t)j;
}

static void raise_nofile(void) {
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) IT_FAIL("setrlimit: %s", strerror(errno));
}

static void check_nofile(int n) {
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    /* a connection takes four descriptors on each side (two sockets, two eventfds); 5 leaves room
     */
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)n * 5 + 64)
        IT_FAIL("RLIMIT_NOFILE %llu is too low for %d connections", (unsigned long long)rl.rlim_cur,
                n);
}

/* a number field of /proc/self/status, e.g. "VmRSS: %llu kB" */
static uint64_t status_field(const char *fmt) {
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL);
    char line[256];
    unsigned long long v = 0;
    bool found = false;
    while (!found && fgets(line, sizeof(line), f)) found = sscanf(line, fmt, &v) == 1;
    fclose(f);
    if (!found) IT_FAIL("no %s in /proc/self/status", fmt);
    return v;
}

static uint64_t vm_rss_kib(void) {
    return status_field("VmRSS: %llu kB");
}

static void print_report(const char *side, int n, const struct mem_report *m) {
    double per = ((double)m->rss_after_kib - (double)m->rss_before_kib) / n;
    printf(
        "%s: %d idle connections: VmRSS %llu KiB -> %llu KiB, %.1f KiB per connection; "
        "fds %llu -> %llu, %.2f per connection; %llu threads\n",
        side, n, (unsigned long long)m->rss_before_kib, (unsigned long long)m->rss_after_kib, per,
        (unsigned long long)m->fds_before, (unsigned long long)m->fds_after,
        ((double)m->fds_after - (double)m->fds_before) / n, (unsigned long long)m->threads_after);
}

static void check_limit(const char *side, int n, const struct mem_report *m, long max_kib) {
    if (max_kib <= 0) return;
    double per = ((double)m->rss_after_kib - (double)m->rss_before_kib) / n;
    if (per > (double)max_kib)
        IT_FAIL("%s: %.1f KiB per idle connection, more than %ld KiB", side, per, max_kib);
}

static void parse(const struct it_args *a, int *n, long *max_kib) {
    if (a->argc < 1) IT_FAIL("usage: ... N [MAX_KIB]");
    *n = atoi(a->argv[0]);
    if (*n < 1 || *n > MAX_CONNS) IT_FAIL("N must be 1..%d", MAX_CONNS);
    *max_kib = a->argc > 1 ? atol(a->argv[1]) : 0;
}

static void server(const struct it_args *a) {
    int n;
    long max_kib;
    parse(a, &n, &max_kib);
    raise_nofile();
    check_nofile(n);
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *buf = it_alloc((size_t)n * SLICE);
    struct mem_report *rep = it_alloc(sizeof(*rep));
    struct rpma_mr_local *mr = NULL, *rep_mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, (size_t)n * SLICE,
                         RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC, &mr));
    CHECK_OK(
        rpma_mr_reg(peer, rep, sizeof(*rep), RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &rep_mr));
    char pdata[IT_MR_DESC_SIZE];
    CHECK_OK(rpma_mr_get_descriptor(mr, pdata));
    struct rpma_conn **conns = calloc((size_t)n, sizeof(*conns));
    int *ids = calloc((size_t)n, sizeof(int));
    CHECK(conns && ids);
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));

    rep->rss_before_kib = vm_rss_kib();
    rep->fds_before = it_open_fds();
    it_ready();
    long long t0 = it_now_ms();
    int conn0 = -1;
    for (int k = 0; k < n; k++) {
        struct rpma_conn_req *req = it_next_req(ep, NULL);
        struct rpma_conn_private_data pd = {0};
        CHECK_OK(rpma_conn_req_get_private_data(req, &pd));
        CHECK_EQ(pd.len, IT_PDATA_CONNECT);
        uint16_t id;
        memcpy(&id, pd.ptr, sizeof(id));
        CHECK(id < n);
        ids[k] = id;
        if (id == 0) conn0 = k;
        /* no wait for ESTABLISHED here: on RDMA it comes once the client has taken its own
         * (librdmacm sends the RTU then), and the client waits for its batch in its own order */
        struct rpma_conn_private_data pd_out = {.ptr = pdata, .len = sizeof(pdata)};
        CHECK_OK(rpma_conn_req_connect(&req, &pd_out, &conns[k]));
    }
    for (int k = 0; k < n; k++) it_expect_event(conns[k], RPMA_CONN_ESTABLISHED);
    long long t1 = it_now_ms();
    rep->rss_after_kib = vm_rss_kib();
    rep->fds_after = it_open_fds();
    rep->threads_after = status_field("Threads: %llu");
    print_report("server", n, rep);
    printf("server: %d connections accepted in %lld ms\n", n, t1 - t0);
    CHECK(conn0 >= 0);
    struct rpma_cq *cq0 = NULL;
    CHECK_OK(rpma_conn_get_cq(conns[conn0], &cq0));
    CHECK_OK(rpma_send(conns[conn0], rep_mr, 0, sizeof(*rep), RPMA_F_COMPLETION_ALWAYS, rep));
    it_cq_expect(cq0, IBV_WC_SEND, rep);

    /*
     * The client says when its checks are done; then this side closes first, so that the
     * TIME_WAIT sockets are ours (on the listening port) rather than 2 N client ports, which lie
     * in the ephemeral range with every other test's fixed port and would block its listener.
     */
    CHECK_OK(rpma_recv(conns[conn0], rep_mr, 0, sizeof(*rep), rep));
    it_cq_expect(cq0, IBV_WC_RECV, rep);
    for (int k = 0; k < n; k++) CHECK_OK(rpma_conn_disconnect(conns[k]));
    for (int k = 0; k < n; k++) {
        it_expect_event(conns[k], RPMA_CONN_CLOSED);
        CHECK_OK(rpma_conn_delete(&conns[k]));
    }
    for (int j = 0; j < n; j++) {
        long bad = it_verify(buf + (size_t)j * SLICE, SLICE, seed(j));
        if (bad >= 0) IT_FAIL("slice %d differs at byte %ld", j, bad);
    }
    printf("server: %d slices checked\n", n);
    check_limit("server", n, rep, max_kib);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_mr_dereg(&rep_mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(conns);
    free(ids);
    free(buf);
    free(rep);
}

static void client(const struct it_args *a) {
    int n;
    long max_kib;
    parse(a, &n, &max_kib);
    raise_nofile();
    check_nofile(n);
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *src = it_alloc((size_t)n * SLICE), *dst = it_alloc((size_t)n * SLICE);
    struct mem_report *srv = it_alloc(sizeof(*srv));
    struct rpma_mr_local *smr = NULL, *dmr = NULL, *rep_mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, src, (size_t)n * SLICE, RPMA_MR_USAGE_WRITE_SRC, &smr));
    CHECK_OK(rpma_mr_reg(peer, dst, (size_t)n * SLICE, RPMA_MR_USAGE_READ_DST, &dmr));
    CHECK_OK(rpma_mr_reg(peer, srv, sizeof(*srv), RPMA_MR_USAGE_RECV, &rep_mr));
    for (int j = 0; j < n; j++) it_fill(src + (size_t)j * SLICE, SLICE, seed(j));
    struct rpma_conn **conns = calloc((size_t)n, sizeof(*conns));
    struct rpma_mr_remote **remote = calloc((size_t)n, sizeof(*remote));
    uint16_t *idbuf = calloc((size_t)n, sizeof(uint16_t));
    CHECK(conns && remote && idbuf);

    struct mem_report me = {.rss_before_kib = vm_rss_kib(), .fds_before = it_open_fds()};
    long long t0 = it_now_ms();
    for (int b = 0; b < n; b += BATCH) {
        int e = b + BATCH < n ? b + BATCH : n;
        for (int j = b; j < e; j++) {
            struct rpma_conn_req *req = NULL;
            CHECK_OK(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
            idbuf[j] = (uint16_t)j;
            struct rpma_conn_private_data pd = {.ptr = &idbuf[j], .len = sizeof(uint16_t)};
            CHECK_OK(rpma_conn_req_connect(&req, &pd, &conns[j]));
        }
        for (int j = b; j < e; j++) it_expect_event(conns[j], RPMA_CONN_ESTABLISHED);
    }
    long long t1 = it_now_ms();
    me.rss_after_kib = vm_rss_kib();
    me.fds_after = it_open_fds();
    me.threads_after = status_field("Threads: %llu");
    print_report("client", n, &me);
    printf("client: %d connections established in %lld ms\n", n, t1 - t0);

    /* the server's numbers */
    struct rpma_cq *cq0 = NULL;
    CHECK_OK(rpma_conn_get_cq(conns[0], &cq0));
    CHECK_OK(rpma_recv(conns[0], rep_mr, 0, sizeof(*srv), srv));
    it_cq_expect(cq0, IBV_WC_RECV, srv);
    print_report("server (as reported)", n, srv);

    /* a write and a read on every connection, all in flight at once */
    for (int j = 0; j < n; j++) {
        remote[j] = it_remote_mr(conns[j], 0);
        size_t off = (size_t)j * SLICE;
        CHECK_OK(rpma_write(conns[j], remote[j], off, smr, off, SLICE, RPMA_F_COMPLETION_ON_ERROR,
                            NULL));
        CHECK_OK(rpma_read(conns[j], dmr, off, remote[j], off, SLICE, RPMA_F_COMPLETION_ALWAYS,
                           (void *)(uintptr_t)(j + 1)));
    }
    for (int j = 0; j < n; j++) {
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conns[j], &cq));
        it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)(uintptr_t)(j + 1));
        long bad = it_verify(dst + (size_t)j * SLICE, SLICE, seed(j));
        if (bad >= 0) IT_FAIL("connection %d: read back differs at byte %ld", j, bad);
    }
    long long t2 = it_now_ms();
    printf("client: %d writes and reads checked in %lld ms\n", n, t2 - t1);

    /* done: the server closes every connection (see the server) */
    CHECK_OK(rpma_send(conns[0], NULL, 0, 0, RPMA_F_COMPLETION_ALWAYS, NULL));
    it_cq_expect(cq0, IBV_WC_SEND, NULL);
    for (int j = 0; j < n; j++) {
        CHECK_OK(rpma_mr_remote_delete(&remote[j]));
        it_expect_event(conns[j], RPMA_CONN_CLOSED);
        CHECK_OK(rpma_conn_disconnect(conns[j]));
    }
    /* only an ordering of the sockets' close (TIME_WAIT on the server's side), not correctness */
    usleep(300 * 1000);
    for (int j = 0; j < n; j++) CHECK_OK(rpma_conn_delete(&conns[j]));
    printf("client: %d connections closed in %lld ms\n", n, it_now_ms() - t2);
    check_limit("client", n, &me, max_kib);
    check_limit("server", n, srv, max_kib);
    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_mr_dereg(&dmr));
    CHECK_OK(rpma_mr_dereg(&rep_mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(conns);
    free(remote);
    free(idbuf);
    free(src);
    free(dst);
    free(srv);
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    alarm(LOAD_ALARM_S);
    if (a.server)
        server(&a);
    else
        client(&a);
    return 0;
}
