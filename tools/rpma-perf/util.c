/* SPDX-License-Identifier: BSD-3-Clause */
/* util.c -- op names, the data pattern, the latency histogram and clocks */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "perf.h"

static const char *const op_names[OP__COUNT] = {
    [OP_READ] = "read",
    [OP_WRITE] = "write",
    [OP_WRITE_FLUSH] = "write-flush",
    [OP_WRITE_FLUSH_PERSISTENT] = "write-flush-persistent",
    [OP_ATOMIC_WRITE] = "atomic-write",
    [OP_SEND] = "send",
    [OP_WRITE_IMM] = "write-imm",
    [OP_GPSPM] = "gpspm",
    [OP_SEND_RECV] = "send-recv",
};

const char *perf_op_name(enum perf_op op) {
    return (unsigned)op < OP__COUNT ? op_names[op] : "?";
}

int perf_op_parse(const char *s, enum perf_op *op) {
    for (int i = 0; i < OP__COUNT; i++)
        if (strcmp(s, op_names[i]) == 0) {
            *op = (enum perf_op)i;
            return 0;
        }
    return -1;
}

uint64_t perf_pattern_word(uint64_t offset) {
    /* splitmix64 of the word index: every word differs, so misplaced data shows */
    uint64_t x = (offset >> 3) + 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void perf_pattern_fill(void *buf, size_t len, uint64_t offset) {
    uint8_t *p = buf;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t w = perf_pattern_word(offset + i);
        memcpy(p + i, &w, len - i < 8 ? len - i : 8);
    }
}

long perf_pattern_check(const void *buf, size_t len, uint64_t offset) {
    const uint8_t *p = buf;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t w = perf_pattern_word(offset + i);
        size_t n = len - i < 8 ? len - i : 8;
        if (memcmp(p + i, &w, n) != 0) {
            for (size_t k = 0; k < n; k++)
                if (p[i + k] != ((const uint8_t *)&w)[k]) return (long)(i + k);
        }
    }
    return -1;
}

void hist_init(struct hist *h) {
    memset(h, 0, sizeof(*h));
    h->min_ns = UINT64_MAX;
}

static unsigned bucket_of(uint64_t v) {
    if (v < 2 * HIST_SUB) return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - 6; /* v >> shift lands in [64, 128) */
    unsigned idx = HIST_SUB * shift + (unsigned)(v >> shift);
    return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/* midpoint of a bucket */
static uint64_t bucket_value(unsigned idx) {
    if (idx < 2 * HIST_SUB) return idx;
    unsigned shift = idx / HIST_SUB - 1;
    uint64_t m = idx - (uint64_t)HIST_SUB * shift;
    return (m << shift) + ((1ULL << shift) >> 1);
}

void hist_add(struct hist *h, uint64_t ns) {
    h->count++;
    h->sum_ns += ns;
    if (ns > h->max_ns) h->max_ns = ns;
    if (ns < h->min_ns) h->min_ns = ns;
    h->b[bucket_of(ns)]++;
}

void hist_merge(struct hist *dst, const struct hist *src) {
    dst->count += src->count;
    dst->sum_ns += src->sum_ns;
    if (src->max_ns > dst->max_ns) dst->max_ns = src->max_ns;
    if (src->min_ns < dst->min_ns) dst->min_ns = src->min_ns;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) dst->b[i] += src->b[i];
}

uint64_t hist_pct(const struct hist *h, double p) {
    if (h->count == 0) return 0;
    if (p >= 100.0) return h->max_ns;
    uint64_t rank = (uint64_t)(p / 100.0 * (double)h->count + 0.999999);
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            uint64_t v = bucket_value(i);
            /* a bucket's midpoint may overshoot the true extremes */
            if (v > h->max_ns) v = h->max_ns;
            if (v < h->min_ns) v = h->min_ns;
            return v;
        }
    }
    return h->max_ns;
}

uint64_t perf_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* --clock tsc: CLOCK_MONOTONIC's time line, advanced by the time stamp counter at the rate
 * measured against it at start (set before any thread starts, read only after) */
static bool g_tsc;
static uint64_t g_tsc0, g_mono0;
static double g_ns_per_tick;

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static uint64_t ticks(void) {
    return __rdtsc();
}

/* the kernel's word that the counter ticks at one rate in every power state */
static bool tsc_invariant(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[4096];
    bool constant = false, nonstop = false;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        constant = strstr(line, " constant_tsc") != NULL;
        nonstop = strstr(line, " nonstop_tsc") != NULL;
        break;
    }
    fclose(f);
    return constant && nonstop;
}
#else
static uint64_t ticks(void) {
    return 0;
}
static bool tsc_invariant(void) {
    return false;
}
#endif

int perf_clock_init(const char *which) {
    bool tsc = strcmp(which, "tsc") == 0 || (strcmp(which, "auto") == 0 && tsc_invariant());
#if !(defined(__x86_64__) || defined(__i386__))
    if (tsc) {
        fprintf(stderr, "rpma-perf: --clock tsc needs an x86 CPU\n");
        return -1;
    }
#endif
    g_tsc = false;
    if (!tsc) return 0;
    /* the rate over 50 ms: the error is the cost of one clock read in 50 ms */
    uint64_t m0 = perf_monotonic_ns(), t0 = ticks(), m1, t1;
    do {
        m1 = perf_monotonic_ns();
        t1 = ticks();
    } while (m1 - m0 < 50000000ULL);
    if (t1 <= t0) {
        fprintf(stderr,
                "rpma-perf: the time stamp counter does not advance; use --clock "
                "monotonic\n");
        return -1;
    }
    g_ns_per_tick = (double)(m1 - m0) / (double)(t1 - t0);
    g_tsc0 = t1;
    g_mono0 = m1;
    g_tsc = true;
    return 0;
}

const char *perf_clock_name(void) {
    return g_tsc ? "tsc" : "monotonic";
}

uint64_t perf_now_ns(void) {
    if (g_tsc) return g_mono0 + (uint64_t)((double)(ticks() - g_tsc0) * g_ns_per_tick);
    return perf_monotonic_ns();
}

void perf_cpu_ns(uint64_t *user, uint64_t *sys) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user = (uint64_t)ru.ru_utime.tv_sec * 1000000000ULL + (uint64_t)ru.ru_utime.tv_usec * 1000ULL;
    *sys = (uint64_t)ru.ru_stime.tv_sec * 1000000000ULL + (uint64_t)ru.ru_stime.tv_usec * 1000ULL;
}

enum rpma_conn_event perf_wait_event(struct rpma_conn *conn, int timeout_ms) {
    int fd = -1;
    if (rpma_conn_get_event_fd(conn, &fd)) return RPMA_CONN_UNDEFINED;
    uint64_t deadline = perf_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    while (perf_now_ns() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, 100);
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
        int ret = rpma_conn_next_event(conn, &ev);
        if (ret == RPMA_E_NO_EVENT) continue;
        return ret ? RPMA_CONN_LOST : ev;
    }
    return RPMA_CONN_UNDEFINED;
}

/* the cause kept by this thread's last failed PERF_CALL, until perf_err prints it */
static _Thread_local const char *t_cause;

int perf_called(int ret) {
    const char *why = why_end(ret);
    t_cause = ret && why_logged() ? why : NULL;
    return ret;
}

int perf_err(const char *who, int idx, const char *what, int ret) {
    char conn[32] = "";
    if (idx >= 0) snprintf(conn, sizeof(conn), "connection %d: ", idx);
    if (t_cause)
        fprintf(stderr, "rpma-perf %s: %s%s\n", who, conn, t_cause);
    else
        fprintf(stderr, "rpma-perf %s: %s%s: %s\n", who, conn, what, rpma_err_2str(ret));
    t_cause = NULL;
    return ret ? ret : -1;
}

struct rpma_peer *perf_peer_new(const char *who, const char *addr, bool server) {
    struct ibv_context *dev = NULL;
    struct rpma_peer *peer = NULL;
    int ret = PERF_CALL(rpma_utils_get_ibv_context(
        addr, server ? RPMA_UTIL_IBV_CONTEXT_LOCAL : RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev));
    if (ret) {
        perf_err(who, -1, server ? "no device with this local address" : "no device to reach it",
                 ret);
        return NULL;
    }
    if ((ret = PERF_CALL(rpma_peer_new(dev, &peer)))) perf_err(who, -1, "cannot make a peer", ret);
    return peer;
}

static int conn_err(const char *who, int idx, const char *what, int ret) {
    return perf_err(who, idx, what, ret);
}

int perf_connect(struct rpma_peer *peer, const char *addr, const char *port,
                 const struct rpma_conn_cfg *cfg, const struct perf_hello *hello, const char *who,
                 int idx, struct rpma_conn **conn, struct rpma_cq **cq,
                 struct rpma_mr_remote **rmr) {
    int ret;
    struct rpma_conn_private_data pd = {.ptr = (void *)hello, .len = sizeof(*hello)};
    struct rpma_conn_req *req = NULL;
    if ((ret = PERF_CALL(rpma_conn_req_new(peer, addr, port, cfg, &req))))
        return conn_err(who, idx, "cannot connect", ret);
    if ((ret = PERF_CALL(rpma_conn_req_connect(&req, &pd, conn))))
        return conn_err(who, idx, "cannot connect", ret);
    enum rpma_conn_event ev = perf_wait_event(*conn, PERF_EVENT_MS);
    if (ev != RPMA_CONN_ESTABLISHED) {
        fprintf(stderr, "rpma-perf %s: cannot connect to %s:%s: %s\n", who, addr, port,
                ev == RPMA_CONN_UNDEFINED ? "timed out" : rpma_utils_conn_event_2str(ev));
        rpma_conn_delete(conn);
        return -1;
    }
    if ((ret = rpma_conn_get_cq(*conn, cq))) return conn_err(who, idx, "rpma_conn_get_cq", ret);

    struct rpma_conn_private_data in = {0};
    struct perf_welcome wel = {0};
    if ((ret = rpma_conn_get_private_data(*conn, &in)))
        return conn_err(who, idx, "rpma_conn_get_private_data", ret);
    if (!in.ptr || in.len < 2) {
        fprintf(stderr, "rpma-perf %s: the server sent no descriptors\n", who);
        return -1;
    }
    memcpy(&wel, in.ptr, in.len < sizeof(wel) ? in.len : sizeof(wel));
    if ((size_t)2 + wel.mr_desc_size + wel.pcfg_desc_size > in.len) {
        fprintf(stderr, "rpma-perf %s: malformed server private data\n", who);
        return -1;
    }
    if ((ret = rpma_mr_remote_from_descriptor(wel.desc, wel.mr_desc_size, rmr)))
        return conn_err(who, idx, "rpma_mr_remote_from_descriptor", ret);
    struct rpma_peer_cfg *pcfg = NULL;
    if ((ret =
             rpma_peer_cfg_from_descriptor(wel.desc + wel.mr_desc_size, wel.pcfg_desc_size, &pcfg)))
        return conn_err(who, idx, "rpma_peer_cfg_from_descriptor", ret);
    ret = rpma_conn_apply_remote_peer_cfg(*conn, pcfg);
    rpma_peer_cfg_delete(&pcfg);
    if (ret) return conn_err(who, idx, "rpma_conn_apply_remote_peer_cfg", ret);
    return 0;
}
