/* SPDX-License-Identifier: BSD-3-Clause */
/* common.c -- helpers shared by the integration test programs */
#define _GNU_SOURCE
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void it_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "[pid %d] %s:%d: ", (int)getpid(), file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stdout);
    exit(1);
}

int it_time_scale(void) {
    const char *s = getenv("RPMA_TEST_TIME_SCALE");
    int scale = s ? atoi(s) : 1;
    return scale > 0 ? scale : 1;
}

const char *it_test_addr(void) {
    const char *addr = getenv("RPMA_TEST_ADDR");
    return addr && *addr ? addr : "127.0.0.1";
}

bool it_reference(void) {
    const char *s = getenv("RPMA_TEST_REFERENCE");
    return s && strcmp(s, "1") == 0;
}

bool it_nic(void) {
    const char *p = getenv("RPMA_PROVIDER");
    return it_reference() || (p && strcmp(p, "verbs") == 0);
}

static void usage(const char *prog) {
    fprintf(stderr, "usage: %s server|client ADDR PORT [args]\n", prog);
    exit(2);
}

void it_init(int argc, char *argv[], struct it_args *args) {
    /* the alarm's default action ends the process: a hung wait never outlives the test */
    alarm(IT_ALARM_S);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* the library's own errors and warnings go to stderr, into the test's log */
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_WARNING));
    if (argc < 4) usage(argv[0]);
    if (strcmp(argv[1], "server") == 0)
        args->server = true;
    else if (strcmp(argv[1], "client") == 0)
        args->server = false;
    else
        usage(argv[0]);
    args->addr = argv[2];
    args->port = argv[3];
    args->argc = argc - 4;
    args->argv = argv + 4;
}

int it_main(int argc, char *argv[], void (*server)(const struct it_args *),
            void (*client)(const struct it_args *)) {
    struct it_args a;
    it_init(argc, argv, &a);
    if (a.server)
        server(&a);
    else
        client(&a);
    return 0;
}

void it_ready(void) {
    printf("READY\n");
    fflush(stdout);
}

struct rpma_peer *it_peer_new(const char *addr, bool server) {
    struct ibv_context *ctx = NULL;
    struct rpma_peer *peer = NULL;
    CHECK_OK(rpma_utils_get_ibv_context(
        addr, server ? RPMA_UTIL_IBV_CONTEXT_LOCAL : RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx));
    CHECK(ctx != NULL);
    CHECK_OK(rpma_peer_new(ctx, &peer));
    CHECK(peer != NULL);
    return peer;
}

/* Whole pages: over verbs on a kernel before 5.13 (ibv_fork_init) a page that holds a
 * registration is missing from a forked child, and with it whatever else shared it. */
void *it_alloc(size_t size) {
    void *p = NULL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t whole = size ? (size + page - 1) / page * page : page;
    if (posix_memalign(&p, page, whole) != 0) IT_FAIL("posix_memalign(%zu) failed", size);
    memset(p, 0, whole);
    return p;
}

long long it_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long it_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

bool it_poll_fd(int fd, int timeout_ms) {
    long long deadline = it_now_ms() + timeout_ms;
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        long long left = deadline - it_now_ms();
        if (left < 0) left = 0;
        int n = poll(&pfd, 1, (int)left);
        if (n > 0) return true;
        if (n == 0) return false;
        if (errno != EINTR) IT_FAIL("poll: %s", strerror(errno));
    }
}

int it_open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

void it_set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    CHECK(fl >= 0);
    CHECK(fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0);
}

/* connections whose CLOSED came first (it_expect_accepted), until it_next_event returns it or
 * the connection is deleted (__wrap_rpma_conn_delete): keyed by address, an entry must not
 * outlive its connection, or a later connection allocated there would inherit its CLOSED */
#define IT_EARLY_CLOSED_MAX 64
static pthread_mutex_t early_closed_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rpma_conn *early_closed[IT_EARLY_CLOSED_MAX];

/* puts `to` in the first slot that holds `from`; false if none does */
static bool early_closed_swap(struct rpma_conn *from, struct rpma_conn *to) {
    bool found = false;
    pthread_mutex_lock(&early_closed_mu);
    for (int i = 0; i < IT_EARLY_CLOSED_MAX && !found; i++) {
        if (early_closed[i] == from) {
            early_closed[i] = to;
            found = true;
        }
    }
    pthread_mutex_unlock(&early_closed_mu);
    return found;
}

/* Every program that links this file is linked with -Wl,--wrap=rpma_conn_delete
 * (CMakeLists.txt), so each deletion, by a helper or by the test itself, drops the entry first. */
int __real_rpma_conn_delete(struct rpma_conn **conn_ptr);
int __wrap_rpma_conn_delete(struct rpma_conn **conn_ptr);
int __wrap_rpma_conn_delete(struct rpma_conn **conn_ptr) {
    if (conn_ptr && *conn_ptr) early_closed_swap(*conn_ptr, NULL);
    return __real_rpma_conn_delete(conn_ptr);
}

enum rpma_conn_event it_next_event(struct rpma_conn *conn) {
    if (early_closed_swap(conn, NULL)) return RPMA_CONN_CLOSED;
    int fd = -1;
    CHECK_OK(rpma_conn_get_event_fd(conn, &fd));
    CHECK(fd >= 0);
    if (!it_poll_fd(fd, IT_WAIT_MS)) IT_FAIL("no connection event within %d ms", IT_WAIT_MS);
    enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    CHECK_OK(rpma_conn_next_event(conn, &ev));
    return ev;
}

static void expect_event_was(enum rpma_conn_event ev, enum rpma_conn_event expected) {
    if (ev != expected)
        IT_FAIL("connection event %s (%d), expected %s (%d)", rpma_utils_conn_event_2str(ev),
                (int)ev, rpma_utils_conn_event_2str(expected), (int)expected);
}

void it_expect_event(struct rpma_conn *conn, enum rpma_conn_event expected) {
    expect_event_was(it_next_event(conn), expected);
}

struct rpma_conn_req *it_next_req(struct rpma_ep *ep, const struct rpma_conn_cfg *cfg) {
    int fd = -1;
    CHECK_OK(rpma_ep_get_fd(ep, &fd));
    CHECK(fd >= 0);
    if (!it_poll_fd(fd, IT_WAIT_MS)) IT_FAIL("no connection request within %d ms", IT_WAIT_MS);
    struct rpma_conn_req *req = NULL;
    CHECK_OK(rpma_ep_next_conn_req(ep, cfg, &req));
    CHECK(req != NULL);
    return req;
}

static struct rpma_conn *connect_req(struct rpma_conn_req **req, const void *pdata,
                                     size_t pdata_len) {
    struct rpma_conn_private_data pd = {.ptr = (void *)pdata, .len = (uint8_t)pdata_len};
    struct rpma_conn *conn = NULL;
    CHECK(pdata_len <= 255);
    CHECK_OK(rpma_conn_req_connect(req, pdata ? &pd : NULL, &conn));
    CHECK(*req == NULL);
    CHECK(conn != NULL);
    return conn;
}

void it_expect_accepted(struct rpma_conn *conn) {
    enum rpma_conn_event ev = it_next_event(conn);
    if (ev == RPMA_CONN_CLOSED && it_nic()) {
        fprintf(stderr, "note: CLOSED before ESTABLISHED (the client's disconnect came first)\n");
        if (!early_closed_swap(NULL, conn))
            IT_FAIL("more than %d connections closed before they were established",
                    IT_EARLY_CLOSED_MAX);
        return;
    }
    expect_event_was(ev, RPMA_CONN_ESTABLISHED);
}

struct rpma_conn *it_accept(struct rpma_conn_req **req, const void *pdata, size_t pdata_len) {
    struct rpma_conn *conn = connect_req(req, pdata, pdata_len);
    it_expect_accepted(conn);
    return conn;
}

struct rpma_conn *it_connect(struct rpma_peer *peer, const char *addr, const char *port,
                             const struct rpma_conn_cfg *cfg, const void *pdata, size_t pdata_len) {
    struct rpma_conn_req *req = NULL;
    CHECK_OK(rpma_conn_req_new(peer, addr, port, cfg, &req));
    CHECK(req != NULL);
    struct rpma_conn *conn = connect_req(&req, pdata, pdata_len);
    it_expect_event(conn, RPMA_CONN_ESTABLISHED);
    return conn;
}

void it_disconnect_active(struct rpma_conn **conn) {
    CHECK_OK(rpma_conn_disconnect(*conn));
    it_expect_event(*conn, RPMA_CONN_CLOSED);
    CHECK_OK(rpma_conn_delete(conn));
    CHECK(*conn == NULL);
}

void it_disconnect_passive(struct rpma_conn **conn, bool lost_ok) {
    enum rpma_conn_event ev = it_next_event(*conn);
    if (!(ev == RPMA_CONN_CLOSED || (lost_ok && ev == RPMA_CONN_LOST)))
        IT_FAIL("connection event %s (%d), expected CLOSED", rpma_utils_conn_event_2str(ev),
                (int)ev);
    CHECK_OK(rpma_conn_disconnect(*conn));
    CHECK_OK(rpma_conn_delete(conn));
    CHECK(*conn == NULL);
}

struct rpma_mr_remote *it_remote_mr(struct rpma_conn *conn, size_t off) {
    struct rpma_conn_private_data pd = {0};
    CHECK_OK(rpma_conn_get_private_data(conn, &pd));
    CHECK(pd.ptr != NULL);
    if (pd.len < off + IT_MR_DESC_SIZE)
        IT_FAIL("private data has %u bytes, need %zu", pd.len, off + IT_MR_DESC_SIZE);
    struct rpma_mr_remote *mr = NULL;
    CHECK_OK(rpma_mr_remote_from_descriptor((const char *)pd.ptr + off, IT_MR_DESC_SIZE, &mr));
    CHECK(mr != NULL);
    return mr;
}

void it_apply_remote_pcfg(struct rpma_conn *conn, size_t off) {
    struct rpma_conn_private_data pd = {0};
    CHECK_OK(rpma_conn_get_private_data(conn, &pd));
    CHECK(pd.ptr != NULL);
    CHECK(pd.len >= off + IT_PCFG_DESC_SIZE);
    struct rpma_peer_cfg *pcfg = NULL;
    CHECK_OK(rpma_peer_cfg_from_descriptor((const char *)pd.ptr + off, IT_PCFG_DESC_SIZE, &pcfg));
    CHECK_OK(rpma_conn_apply_remote_peer_cfg(conn, pcfg));
    CHECK_OK(rpma_peer_cfg_delete(&pcfg));
}

struct rpma_conn *it_accept_with_recvs(struct rpma_conn_req **req, struct rpma_mr_local *mr, int n,
                                       size_t len, uintptr_t wr_id0, const void *pdata,
                                       size_t pdata_len) {
    CHECK(n >= 1);
    CHECK_OK(rpma_conn_req_recv(*req, mr, 0, len, (void *)wr_id0));
    struct rpma_conn *conn = it_accept(req, pdata, pdata_len);
    for (uintptr_t k = 1; k < (uintptr_t)n; k++)
        CHECK_OK(rpma_recv(conn, mr, k * len, len, (void *)(wr_id0 + k)));
    return conn;
}

void it_region_server_open(struct it_region_server *s, const struct it_args *a, void *buf,
                           size_t size, int usage) {
    s->peer = it_peer_new(a->addr, true);
    s->mr = NULL;
    CHECK_OK(rpma_mr_reg(s->peer, buf, size, usage, &s->mr));
    CHECK_OK(rpma_mr_get_descriptor(s->mr, s->desc));
    s->ep = NULL;
    CHECK_OK(rpma_ep_listen(s->peer, a->addr, a->port, &s->ep));
    it_ready();
}

struct rpma_conn *it_region_server_accept(struct it_region_server *s) {
    struct rpma_conn_req *req = it_next_req(s->ep, NULL);
    return it_accept(&req, s->desc, sizeof(s->desc));
}

void it_region_server_close(struct it_region_server *s) {
    CHECK_OK(rpma_ep_shutdown(&s->ep));
    CHECK_OK(rpma_mr_dereg(&s->mr));
    CHECK_OK(rpma_peer_delete(&s->peer));
}

struct rpma_conn *it_connect_region(struct rpma_peer *peer, const struct it_args *a,
                                    const struct rpma_conn_cfg *cfg, const void *pdata,
                                    size_t pdata_len, struct rpma_mr_remote **remote,
                                    struct rpma_cq **cq) {
    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, cfg, pdata, pdata_len);
    *remote = it_remote_mr(conn, 0);
    *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, cq));
    return conn;
}

void it_disconnect_region(struct rpma_conn **conn, struct rpma_mr_remote **remote) {
    CHECK_OK(rpma_mr_remote_delete(remote));
    it_disconnect_active(conn);
}

bool it_cq_next(struct rpma_cq *cq, struct ibv_wc *wc, int timeout_ms) {
    long long deadline = it_now_ms() + timeout_ms;
    int fd = -1;
    CHECK_OK(rpma_cq_get_fd(cq, &fd));
    for (;;) {
        int got = 0;
        memset(wc, 0, sizeof(*wc));
        int ret = rpma_cq_get_wc(cq, 1, wc, &got);
        if (ret == 0) {
            CHECK_EQ(got, 1);
            return true;
        }
        if (ret != RPMA_E_NO_COMPLETION)
            IT_FAIL("rpma_cq_get_wc returned %d (%s)", ret, rpma_err_2str(ret));
        long long left = deadline - it_now_ms();
        if (left <= 0) return false;
        if (!it_poll_fd(fd, (int)left))
            continue; /* one more look at the CQ, then the deadline ends it */
        ret = rpma_cq_wait(cq);
        if (ret != 0 && ret != RPMA_E_NO_COMPLETION)
            IT_FAIL("rpma_cq_wait returned %d (%s)", ret, rpma_err_2str(ret));
    }
}

void it_cq_get(struct rpma_cq *cq, struct ibv_wc *wc) {
    if (!it_cq_next(cq, wc, IT_WAIT_MS)) IT_FAIL("no completion within %d ms", IT_WAIT_MS);
}

/* it_cq_expect's checks of wc, taken from cq */
static void cq_expect(struct rpma_cq *cq, enum ibv_wc_opcode opcode, const void *op_context,
                      struct ibv_wc *out) {
    struct ibv_wc wc;
    it_cq_get(cq, &wc);
    if (wc.status != IBV_WC_SUCCESS)
        IT_FAIL("completion wr_id %llu failed: %s (%d)", (unsigned long long)wc.wr_id,
                it_wc_status_str(wc.status), (int)wc.status);
    if (wc.wr_id != (uint64_t)(uintptr_t)op_context)
        IT_FAIL("completion wr_id %llu, expected %llu", (unsigned long long)wc.wr_id,
                (unsigned long long)(uintptr_t)op_context);
    if (wc.opcode != opcode)
        IT_FAIL("completion opcode %d, expected %d (wr_id %llu)", (int)wc.opcode, (int)opcode,
                (unsigned long long)wc.wr_id);
    *out = wc;
}

void it_cq_expect(struct rpma_cq *cq, enum ibv_wc_opcode opcode, const void *op_context) {
    struct ibv_wc wc;
    cq_expect(cq, opcode, op_context, &wc);
}

void it_cq_expect_len(struct rpma_cq *cq, enum ibv_wc_opcode opcode, const void *op_context,
                      uint32_t byte_len) {
    struct ibv_wc wc;
    cq_expect(cq, opcode, op_context, &wc);
    if (wc.byte_len != byte_len)
        IT_FAIL("completion byte_len %u, expected %u (wr_id %llu)", wc.byte_len, byte_len,
                (unsigned long long)wc.wr_id);
}

void it_cq_expect_status(struct rpma_cq *cq, uintptr_t wr_id, enum ibv_wc_status status,
                         const char *what) {
    struct ibv_wc wc;
    it_cq_get(cq, &wc);
    if (wc.wr_id != (uint64_t)wr_id)
        IT_FAIL("%s: completion wr_id %llu, expected %llu", what, (unsigned long long)wc.wr_id,
                (unsigned long long)wr_id);
    if (wc.status != status)
        IT_FAIL("%s: status %s (%d), expected %s", what, it_wc_status_str(wc.status),
                (int)wc.status, it_wc_status_str(status));
}

void it_cq_expect_set(struct rpma_cq *cq, int n, const enum ibv_wc_opcode *opcodes,
                      const uintptr_t *ctxs, struct ibv_wc *out) {
    bool seen[64] = {false};
    CHECK(n <= 64);
    for (int got = 0; got < n; got++) {
        struct ibv_wc wc;
        it_cq_get(cq, &wc);
        if (wc.status != IBV_WC_SUCCESS)
            IT_FAIL("completion wr_id %llu failed: %s (%d)", (unsigned long long)wc.wr_id,
                    it_wc_status_str(wc.status), (int)wc.status);
        int k = 0;
        while (k < n && (seen[k] || ctxs[k] != wc.wr_id)) k++;
        if (k == n)
            IT_FAIL("unexpected completion wr_id %llu opcode %d", (unsigned long long)wc.wr_id,
                    (int)wc.opcode);
        if (wc.opcode != opcodes[k])
            IT_FAIL("completion opcode %d, expected %d (wr_id %llu)", (int)wc.opcode,
                    (int)opcodes[k], (unsigned long long)wc.wr_id);
        seen[k] = true;
        if (out) out[k] = wc;
    }
}

void it_cq_expect_empty(struct rpma_cq *cq) {
    struct ibv_wc wc;
    int got = 0;
    int ret = rpma_cq_get_wc(cq, 1, &wc, &got);
    if (ret != RPMA_E_NO_COMPLETION)
        IT_FAIL("CQ not empty: rpma_cq_get_wc returned %d, wr_id %llu opcode %d", ret,
                ret == 0 ? (unsigned long long)wc.wr_id : 0ULL, ret == 0 ? (int)wc.opcode : -1);
}

void it_cq_take_events(struct rpma_cq *cq) {
    int ret;
    while ((ret = rpma_cq_wait(cq)) == 0)
        ;
    CHECK_ERR(ret, RPMA_E_NO_COMPLETION);
}

const char *it_wc_status_str(enum ibv_wc_status status) {
    switch (status) {
        case IBV_WC_SUCCESS:
            return "IBV_WC_SUCCESS";
        case IBV_WC_LOC_LEN_ERR:
            return "IBV_WC_LOC_LEN_ERR";
        case IBV_WC_LOC_QP_OP_ERR:
            return "IBV_WC_LOC_QP_OP_ERR";
        case IBV_WC_LOC_PROT_ERR:
            return "IBV_WC_LOC_PROT_ERR";
        case IBV_WC_WR_FLUSH_ERR:
            return "IBV_WC_WR_FLUSH_ERR";
        case IBV_WC_REM_INV_REQ_ERR:
            return "IBV_WC_REM_INV_REQ_ERR";
        case IBV_WC_REM_ACCESS_ERR:
            return "IBV_WC_REM_ACCESS_ERR";
        case IBV_WC_REM_OP_ERR:
            return "IBV_WC_REM_OP_ERR";
        case IBV_WC_RETRY_EXC_ERR:
            return "IBV_WC_RETRY_EXC_ERR";
        case IBV_WC_RNR_RETRY_EXC_ERR:
            return "IBV_WC_RNR_RETRY_EXC_ERR";
        case IBV_WC_GENERAL_ERR:
            return "IBV_WC_GENERAL_ERR";
        default:
            return "other status";
    }
}

int it_shm_mappings(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) IT_FAIL("/proc/self/maps: %s", strerror(errno));
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, "/memfd:rpma-shm")) n++;
    fclose(f);
    return n;
}

int it_fork(void) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) IT_FAIL("fork: %s", strerror(errno));
    if (pid == 0) alarm(IT_ALARM_S);
    return (int)pid;
}

void it_wait_killed(int pid) {
    int status = 0;
    while (waitpid((pid_t)pid, &status, 0) < 0)
        if (errno != EINTR) IT_FAIL("waitpid: %s", strerror(errno));
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        if (WIFEXITED(status))
            IT_FAIL("child %d exited with %d instead of being killed", pid, WEXITSTATUS(status));
        IT_FAIL("child %d ended by signal %d instead of SIGKILL", pid,
                WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    }
}

void it_wait_for_death(int seconds) {
    long long deadline = it_now_ms() + (long long)seconds * 1000;
    while (it_now_ms() < deadline) usleep(10000);
    IT_FAIL("still alive after %d s: the peer should have killed this process", seconds);
}

static uint64_t mix(uint64_t x) {
    /* splitmix64 finaliser: cheap and position-sensitive */
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint8_t pattern_byte(size_t i, uint64_t seed) {
    return (uint8_t)(mix(seed * 0x100000001b3ULL + (i >> 3)) >> ((i & 7) * 8));
}

void it_fill(void *buf, size_t len, uint64_t seed) {
    uint8_t *p = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = mix(seed * 0x100000001b3ULL + (i >> 3));
        for (int b = 0; b < 8; b++) p[i + b] = (uint8_t)(w >> (b * 8));
    }
    for (; i < len; i++) p[i] = pattern_byte(i, seed);
}

long it_verify(const void *buf, size_t len, uint64_t seed) {
    const uint8_t *p = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = mix(seed * 0x100000001b3ULL + (i >> 3));
        for (int b = 0; b < 8; b++)
            if (p[i + b] != (uint8_t)(w >> (b * 8))) return (long)(i + b);
    }
    for (; i < len; i++)
        if (p[i] != pattern_byte(i, seed)) return (long)i;
    return -1;
}

uint64_t it_checksum(const void *buf, size_t len) {
    const uint8_t *p = buf;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
