/* SPDX-License-Identifier: BSD-3-Clause */
/* common.c -- helpers shared by the examples (see common.h) */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* "05-flush-to-persistent/server": the example's folder and the program */
static char g_prog[128] = "example";

static void __attribute__((noreturn)) vfail(const char *why, const char *fmt, va_list ap) {
    char what[512];
    vsnprintf(what, sizeof(what), fmt, ap);
    fflush(stdout);
    if (why)
        fprintf(stderr, "%s: %s: %s\n", g_prog, what, why);
    else
        fprintf(stderr, "%s: %s\n", g_prog, what);
    exit(1);
}

void ex_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(NULL, fmt, ap);
}

void ex_fail_call(const char *why, const char *what_fmt, ...) {
    if (why_logged()) {
        /* the library's message says what failed and why */
        fflush(stdout);
        fprintf(stderr, "%s: %s\n", g_prog, why);
        exit(1);
    }
    va_list ap;
    va_start(ap, what_fmt);
    vfail(why, what_fmt, ap);
}

int ex_time_scale(void) {
    const char *s = getenv("RPMA_TEST_TIME_SCALE");
    int scale = s ? atoi(s) : 1;
    return scale > 0 ? scale : 1;
}

void ex_start(void) {
    const char *path = program_invocation_name, *base = strrchr(path, '/');
    if (base) {
        const char *dir = base;
        while (dir > path && dir[-1] != '/') dir--;
        snprintf(g_prog, sizeof(g_prog), "%s", dir);
    } else {
        snprintf(g_prog, sizeof(g_prog), "%s", path);
    }
    why_init(g_prog);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* SIGALRM's default action ends the process */
    alarm(EX_BACKSTOP_S);
}

struct rpma_peer *ex_peer_new(const char *addr, bool server) {
    struct ibv_context *dev = NULL;
    why_begin();
    int ret = rpma_utils_get_ibv_context(
        addr, server ? RPMA_UTIL_IBV_CONTEXT_LOCAL : RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev);
    const char *why = why_end(ret);
    if (ret)
        ex_fail_call(why, "no device %s %s", server ? "with the local address" : "to reach", addr);
    struct rpma_peer *peer = NULL;
    EX_CHECK(rpma_peer_new(dev, &peer));
    return peer;
}

struct rpma_ep *ex_listen(struct rpma_peer *peer, const char *addr, const char *port) {
    struct rpma_ep *ep = NULL;
    why_begin();
    int ret = rpma_ep_listen(peer, addr, port, &ep);
    const char *why = why_end(ret);
    if (ret) ex_fail_call(why, "cannot listen on %s:%s", addr, port);
    printf("listening on %s:%s\n", addr, port);
    return ep;
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool ex_poll_fd(int fd, int timeout_ms) {
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        long long left = deadline - now_ms();
        int n = poll(&pfd, 1, left > 0 ? (int)left : 0);
        if (n > 0) return true;
        if (n == 0) return false;
        if (errno != EINTR) EX_FAIL("poll: %s", strerror(errno));
    }
}

struct rpma_conn_req *ex_next_conn_req(struct rpma_ep *ep, const struct rpma_conn_cfg *cfg) {
    int fd = -1;
    EX_CHECK(rpma_ep_get_fd(ep, &fd));
    if (!ex_poll_fd(fd, EX_WAIT_MS)) EX_FAIL("no connection request within %d ms", EX_WAIT_MS);
    struct rpma_conn_req *req = NULL;
    EX_CHECK(rpma_ep_next_conn_req(ep, cfg, &req));
    return req;
}

enum rpma_conn_event ex_next_event(struct rpma_conn *conn) {
    int fd = -1;
    EX_CHECK(rpma_conn_get_event_fd(conn, &fd));
    if (!ex_poll_fd(fd, EX_WAIT_MS)) EX_FAIL("no connection event within %d ms", EX_WAIT_MS);
    enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    EX_CHECK(rpma_conn_next_event(conn, &ev));
    return ev;
}

static void expect_event_was(enum rpma_conn_event ev, enum rpma_conn_event expected) {
    if (ev != expected)
        EX_FAIL("connection event %s, expected %s", rpma_utils_conn_event_2str(ev),
                rpma_utils_conn_event_2str(expected));
}

void ex_expect_event(struct rpma_conn *conn, enum rpma_conn_event expected) {
    expect_event_was(ex_next_event(conn), expected);
}

static struct rpma_conn *start(struct rpma_conn_req **req, const void *pdata, size_t pdata_len) {
    if (pdata_len > UINT8_MAX) EX_FAIL("private data of %zu bytes is too long", pdata_len);
    struct rpma_conn_private_data pd = {.ptr = (void *)pdata, .len = (uint8_t)pdata_len};
    struct rpma_conn *conn = NULL;
    EX_CHECK(rpma_conn_req_connect(req, pdata ? &pd : NULL, &conn));
    return conn;
}

/* accepted connections whose first event was CLOSED (ex_accept); ex_wait_closed takes it */
#define EX_EARLY_CLOSED_MAX 8
static struct rpma_conn *early_closed[EX_EARLY_CLOSED_MAX];

/* puts `to` in the first slot that holds `from`; false if none does */
static bool early_closed_swap(struct rpma_conn *from, struct rpma_conn *to) {
    for (int i = 0; i < EX_EARLY_CLOSED_MAX; i++) {
        if (early_closed[i] == from) {
            early_closed[i] = to;
            return true;
        }
    }
    return false;
}

struct rpma_conn *ex_accept(struct rpma_conn_req **req, const void *pdata, size_t pdata_len) {
    struct rpma_conn *conn = start(req, pdata, pdata_len);
    enum rpma_conn_event ev = ex_next_event(conn);
    if (ev == RPMA_CONN_CLOSED) {
        fprintf(stderr, "%s: note: the client disconnected before the connection was established\n",
                g_prog);
        if (!early_closed_swap(NULL, conn))
            EX_FAIL("more than %d connections closed before they were established",
                    EX_EARLY_CLOSED_MAX);
        return conn;
    }
    expect_event_was(ev, RPMA_CONN_ESTABLISHED);
    return conn;
}

struct rpma_conn *ex_connect(struct rpma_peer *peer, const char *addr, const char *port,
                             const struct rpma_conn_cfg *cfg, const void *pdata, size_t pdata_len) {
    struct rpma_conn_req *req = NULL;
    why_begin();
    int ret = rpma_conn_req_new(peer, addr, port, cfg, &req);
    const char *why = why_end(ret);
    if (ret) ex_fail_call(why, "cannot connect to %s:%s", addr, port);
    struct rpma_conn *conn = start(&req, pdata, pdata_len);
    enum rpma_conn_event ev = ex_next_event(conn);
    if (ev != RPMA_CONN_ESTABLISHED)
        EX_FAIL("cannot connect to %s:%s: %s", addr, port, rpma_utils_conn_event_2str(ev));
    return conn;
}

void ex_disconnect(struct rpma_conn **conn) {
    EX_CHECK(rpma_conn_disconnect(*conn));
    ex_expect_event(*conn, RPMA_CONN_CLOSED);
    EX_CHECK(rpma_conn_delete(conn));
}

void ex_wait_closed(struct rpma_conn **conn) {
    if (!early_closed_swap(*conn, NULL)) ex_expect_event(*conn, RPMA_CONN_CLOSED);
    EX_CHECK(rpma_conn_disconnect(*conn));
    EX_CHECK(rpma_conn_delete(conn));
}

struct rpma_mr_remote *ex_remote_mr_from_pdata(struct rpma_conn *conn, size_t off) {
    struct rpma_conn_private_data pd = {0};
    EX_CHECK(rpma_conn_get_private_data(conn, &pd));
    if (pd.ptr == NULL || pd.len <= off)
        EX_FAIL("the server sent %u bytes of private data, no descriptor at %zu", pd.len, off);
    struct rpma_mr_remote *mr = NULL;
    EX_CHECK(rpma_mr_remote_from_descriptor((const char *)pd.ptr + off, pd.len - off, &mr));
    return mr;
}

void ex_cq_next(struct rpma_cq *cq, struct ibv_wc *wc) {
    long long deadline = now_ms() + EX_WAIT_MS;
    int fd = -1;
    EX_CHECK(rpma_cq_get_fd(cq, &fd));
    for (;;) {
        /* a wake-up may find the CQ already drained: always look before waiting */
        int ret = rpma_cq_get_wc(cq, 1, wc, NULL);
        if (ret == 0) return;
        if (ret != RPMA_E_NO_COMPLETION) EX_FAIL("rpma_cq_get_wc failed: %s", rpma_err_2str(ret));
        long long left = deadline - now_ms();
        if (left <= 0 || !ex_poll_fd(fd, (int)left))
            EX_FAIL("no completion within %d ms", EX_WAIT_MS);
        ret = rpma_cq_wait(cq);
        if (ret != 0 && ret != RPMA_E_NO_COMPLETION)
            EX_FAIL("rpma_cq_wait failed: %s", rpma_err_2str(ret));
    }
}

void ex_cq_expect(struct rpma_cq *cq, enum ibv_wc_opcode opcode, const void *op_context,
                  struct ibv_wc *wc_out) {
    struct ibv_wc wc;
    ex_cq_next(cq, &wc);
    if (wc.status != IBV_WC_SUCCESS)
        EX_FAIL("operation %#llx failed with completion status %d", (unsigned long long)wc.wr_id,
                (int)wc.status);
    if (wc.wr_id != (uint64_t)(uintptr_t)op_context)
        EX_FAIL("completion of operation %#llx, expected %p", (unsigned long long)wc.wr_id,
                op_context);
    if (wc.opcode != opcode)
        EX_FAIL("completion opcode %d, expected %d", (int)wc.opcode, (int)opcode);
    if (wc_out) *wc_out = wc;
}

void *ex_malloc(size_t size) {
    void *p = NULL;
    if (posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), size) != 0)
        EX_FAIL("cannot allocate %zu bytes", size);
    memset(p, 0, size);
    return p;
}

void ex_mem_map(const char *path, size_t size, struct ex_mem *mem) {
    mem->size = size;
    mem->fd = -1;
    if (path == NULL) {
        mem->ptr = ex_malloc(size);
        return;
    }
    mem->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (mem->fd < 0) EX_FAIL("open(%s): %s", path, strerror(errno));
    struct stat st;
    if (fstat(mem->fd, &st) != 0) EX_FAIL("fstat(%s): %s", path, strerror(errno));
    if ((size_t)st.st_size < size && ftruncate(mem->fd, (off_t)size) != 0)
        EX_FAIL("ftruncate(%s): %s", path, strerror(errno));
    mem->ptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mem->fd, 0);
    if (mem->ptr == MAP_FAILED) EX_FAIL("mmap(%s): %s", path, strerror(errno));
}

void ex_mem_persist(const struct ex_mem *mem, size_t off, size_t len) {
    if (mem->fd < 0) return;
    /* msync wants a page-aligned start */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t begin = off & ~(page - 1);
    if (msync((char *)mem->ptr + begin, off + len - begin, MS_SYNC) != 0)
        EX_FAIL("msync: %s", strerror(errno));
}

void ex_mem_print_earlier(struct ex_mem *mem, const char *path) {
    char *s = mem->ptr;
    s[mem->size - 1] = '\0';
    if (s[0])
        printf("%s holds \"%s\" from an earlier run\n", path, s);
    else
        printf("%s holds no string yet (a new or zeroed file)\n", path);
}

void ex_mem_unmap(struct ex_mem *mem) {
    if (mem->fd < 0) {
        free(mem->ptr);
    } else {
        if (munmap(mem->ptr, mem->size) != 0) EX_FAIL("munmap: %s", strerror(errno));
        close(mem->fd);
    }
    mem->ptr = NULL;
    mem->fd = -1;
}
