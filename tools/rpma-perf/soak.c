/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * soak.c -- rpma-perf soak: a long mixed run that checks every byte it reads.
 *
 * Each connection (one thread each) owns a window of the server's region and keeps a shadow
 * copy of what the window must hold. It keeps iodepth operations in flight, chosen at random:
 * writes, reads, write+flush, flushes of either type and atomic writes, with random lengths
 * (log-uniform up to --size) at random, mostly unaligned, offsets. The shadow changes when a
 * write is posted and a read takes a snapshot of it when posted: operations on a connection
 * execute in posting order, so a read must return exactly its snapshot. At the end every window
 * is read back whole and compared with its shadow.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"

#define SOAK_CHUNK (1u << 20)
#define SOAK_MAX_REPORTS 20
#define SOAK_MAX_WC 32

enum soak_kind { K_WRITE, K_READ, K_WRITE_FLUSH, K_FLUSH, K_ATOMIC, K__COUNT };
static const char *const kind_names[K__COUNT] = {"write", "read", "write+flush", "flush", "atomic"};

struct soak_slot {
    enum soak_kind kind;
    uint64_t off;
    size_t len;
    char *buf; /* source or destination, max_size bytes */
    char *exp; /* what a read must return */
};

struct soak_worker {
    int idx;
    const struct soak_opts *o;
    pthread_t thread;
    struct rpma_conn *conn;
    struct rpma_cq *cq;
    struct rpma_mr_remote *rmr;
    struct rpma_mr_local *lmr; /* slots' buffers */
    char *lbuf;
    struct rpma_mr_local *vmr; /* the whole window, for the first fill and the last check */
    char *vbuf;
    char *shadow;
    char *exp; /* slots' expected data */
    struct soak_slot *slots;
    int *free_slots;
    int nfree;
    uint64_t base, win;
    size_t rsize; /* the server region's size */
    uint64_t rng;
    bool persistent_ok;
    /* counters the status line reads */
    atomic_uint_fast64_t ops[K__COUNT];
    atomic_uint_fast64_t bytes_written, bytes_read;
    atomic_uint_fast64_t mismatches; /* operations whose data differed */
    int err;
};

static atomic_bool g_stop;
static atomic_uint_fast64_t g_heartbeat;
static atomic_int g_reports;
static atomic_int g_exited;

static uint64_t rnd(uint64_t *s) {
    /* splitmix64: fast, and good enough to pick sizes and fill buffers */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void rnd_fill(uint64_t *s, char *p, size_t len) {
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = rnd(s);
        memcpy(p + i, &v, 8);
    }
    if (i < len) {
        uint64_t v = rnd(s);
        memcpy(p + i, &v, len - i);
    }
}

static int soak_err(const struct soak_worker *w, const char *what, int ret) {
    return perf_err("soak", w ? w->idx : -1, what, ret);
}

/* a length in [1, max], log-uniform so that small and large operations both occur */
static size_t rnd_len(uint64_t *s, size_t max) {
    unsigned bits = 0;
    while (((size_t)1 << (bits + 1)) <= max) bits++;
    size_t cap = (size_t)1 << (rnd(s) % (bits + 1));
    size_t len = 1 + (size_t)(rnd(s) % cap);
    return len < max ? len : max;
}

/* how a mismatched read's bytes compare with the window now and with the poison it started as */
static const char *classify(const struct soak_worker *w, uint64_t off, size_t len, const char *got,
                            const char *exp) {
    if (w == NULL || off + len > w->win) return "";
    bool all_now = true, all_poison = true;
    char poison = (char)(0xa5 ^ (int)(off & 0xff));
    for (size_t i = 0; i < len; i++) {
        if (got[i] == exp[i]) continue;
        if (got[i] != w->shadow[off + i]) all_now = false;
        if (got[i] != poison) all_poison = false;
    }
    if (all_poison) return "; the differing bytes were never placed (still the poison)";
    if (all_now) return "; they hold what later-posted writes put there";
    return "; they match neither the expected data nor later writes";
}

static void report_mismatch(struct soak_worker *w, const char *what, uint64_t off, size_t len,
                            const char *got, const char *exp, bool is_read) {
    atomic_fetch_add(&w->mismatches, 1);
    size_t first = 0, bad = 0;
    while (first < len && got[first] == exp[first]) first++;
    for (size_t i = first; i < len; i++) bad += got[i] != exp[i];
    if (atomic_fetch_add(&g_reports, 1) >= SOAK_MAX_REPORTS) return;
    fprintf(stderr,
            "rpma-perf soak: MISMATCH connection %d, %s of %zu bytes at remote offset %llu: %zu "
            "bytes differ, first at offset %llu (expected 0x%02x, got 0x%02x)%s\n",
            w->idx, what, len, (unsigned long long)(w->base + off), bad,
            (unsigned long long)(w->base + off + first), (unsigned char)exp[first],
            (unsigned char)got[first], is_read ? classify(w, off, len, got, exp) : "");
}

static int next_wcs(struct soak_worker *w, struct ibv_wc *wc, int max, int *got) {
    for (;;) {
        int ret = rpma_cq_get_wc(w->cq, max, wc, got);
        if (ret == 0) {
            atomic_fetch_add_explicit(&g_heartbeat, 1, memory_order_relaxed);
            return 0;
        }
        if (ret != RPMA_E_NO_COMPLETION) return soak_err(w, "rpma_cq_get_wc", ret);
        ret = rpma_cq_wait(w->cq);
        if (ret && ret != RPMA_E_NO_COMPLETION) return soak_err(w, "rpma_cq_wait", ret);
    }
}

/* moves the window between vbuf and the server, one chunk at a time, nothing else in flight */
static int bulk(struct soak_worker *w, bool to_server) {
    for (uint64_t off = 0; off < w->win; off += SOAK_CHUNK) {
        size_t n = w->win - off < SOAK_CHUNK ? (size_t)(w->win - off) : SOAK_CHUNK;
        int ret = to_server ? rpma_write(w->conn, w->rmr, w->base + off, w->vmr, off, n,
                                         RPMA_F_COMPLETION_ALWAYS, NULL)
                            : rpma_read(w->conn, w->vmr, off, w->rmr, w->base + off, n,
                                        RPMA_F_COMPLETION_ALWAYS, NULL);
        if (ret)
            return soak_err(
                w, to_server ? "cannot write the check window" : "cannot read the check window",
                ret);
        struct ibv_wc wc;
        int got = 0;
        if ((ret = next_wcs(w, &wc, 1, &got))) return ret;
        if (wc.status != IBV_WC_SUCCESS) {
            fprintf(stderr, "rpma-perf soak: connection %d: window %s failed with status %d\n",
                    w->idx, to_server ? "write" : "read", (int)wc.status);
            return -1;
        }
    }
    return 0;
}

/* compares the whole window with the shadow */
static int check_window(struct soak_worker *w, const char *what) {
    memset(w->vbuf, 0, w->win);
    int ret = bulk(w, false);
    if (ret) return ret;
    atomic_fetch_add(&w->bytes_read, w->win);
    for (uint64_t off = 0; off < w->win; off += SOAK_CHUNK) {
        size_t n = w->win - off < SOAK_CHUNK ? (size_t)(w->win - off) : SOAK_CHUNK;
        if (memcmp(w->vbuf + off, w->shadow + off, n) != 0)
            report_mismatch(w, what, off, n, w->vbuf + off, w->shadow + off, false);
    }
    return 0;
}

/*
 * A flush of [ro, ro + len). RDMA carries a flush out as an 8-byte read at its offset, which must
 * leave 8 bytes in the region (rpma_flush(3)): near the region's end the flush starts earlier and
 * still covers the range, as a program written for a NIC does.
 */
static int flush_range(struct soak_worker *w, uint64_t ro, size_t len, enum rpma_flush_type ft,
                       void *ctx) {
    uint64_t fo = ro + 8 <= w->rsize ? ro : w->rsize - 8;
    return rpma_flush(w->conn, w->rmr, fo, len + (size_t)(ro - fo), ft, RPMA_F_COMPLETION_ALWAYS,
                      ctx);
}

static int post(struct soak_worker *w, int s) {
    struct soak_slot *sl = &w->slots[s];
    void *ctx = (void *)(uintptr_t)s;
    uint64_t r = rnd(&w->rng) % 100;
    sl->kind = r < 38   ? K_WRITE
               : r < 73 ? K_READ
               : r < 85 ? K_WRITE_FLUSH
               : r < 90 ? K_FLUSH
                        : K_ATOMIC;
    if (sl->kind == K_ATOMIC) {
        sl->len = 8;
        sl->off = (rnd(&w->rng) % (w->win / 8)) * 8;
    } else {
        sl->len = rnd_len(&w->rng, w->o->max_size < w->win ? w->o->max_size : (size_t)w->win);
        sl->off = rnd(&w->rng) % (w->win - sl->len + 1);
    }
    uint64_t ro = w->base + sl->off;
    size_t lo = (size_t)s * w->o->max_size;
    enum rpma_flush_type ft = (w->persistent_ok && (rnd(&w->rng) & 1)) ? RPMA_FLUSH_TYPE_PERSISTENT
                                                                       : RPMA_FLUSH_TYPE_VISIBILITY;
    int ret;
    switch (sl->kind) {
        case K_WRITE:
        case K_WRITE_FLUSH:
            rnd_fill(&w->rng, sl->buf, sl->len);
            memcpy(w->shadow + sl->off, sl->buf, sl->len);
            ret = rpma_write(
                w->conn, w->rmr, ro, w->lmr, lo, sl->len,
                sl->kind == K_WRITE ? RPMA_F_COMPLETION_ALWAYS : RPMA_F_COMPLETION_ON_ERROR, ctx);
            if (ret || sl->kind == K_WRITE) return ret;
            return flush_range(w, ro, sl->len, ft, ctx);
        case K_READ:
            memcpy(sl->exp, w->shadow + sl->off, sl->len);
            /* poison, so that a read that placed nothing shows */
            memset(sl->buf, 0xa5 ^ (int)(sl->off & 0xff), sl->len);
            return rpma_read(w->conn, w->lmr, lo, w->rmr, ro, sl->len, RPMA_F_COMPLETION_ALWAYS,
                             ctx);
        case K_FLUSH:
            return flush_range(w, ro, sl->len, ft, ctx);
        case K_ATOMIC: {
            uint64_t v = rnd(&w->rng);
            memcpy(sl->buf, &v, 8);
            memcpy(w->shadow + sl->off, &v, 8);
            return rpma_atomic_write(w->conn, w->rmr, ro, sl->buf, RPMA_F_COMPLETION_ALWAYS, ctx);
        }
        default:
            return RPMA_E_INVAL;
    }
}

static void complete(struct soak_worker *w, int s) {
    struct soak_slot *sl = &w->slots[s];
    atomic_fetch_add_explicit(&w->ops[sl->kind], 1, memory_order_relaxed);
    switch (sl->kind) {
        case K_WRITE:
        case K_WRITE_FLUSH:
        case K_ATOMIC:
            atomic_fetch_add_explicit(&w->bytes_written, sl->len, memory_order_relaxed);
            break;
        case K_READ:
            atomic_fetch_add_explicit(&w->bytes_read, sl->len, memory_order_relaxed);
            if (memcmp(sl->buf, sl->exp, sl->len) != 0)
                report_mismatch(w, "read", sl->off, sl->len, sl->buf, sl->exp, true);
            break;
        default:
            break;
    }
}

static int run(struct soak_worker *w, uint64_t deadline) {
    int inflight = 0, depth = w->o->iodepth;
    struct ibv_wc wc[SOAK_MAX_WC];
    bool posting = true;
    for (;;) {
        while (posting && inflight < depth) {
            int s = w->free_slots[--w->nfree];
            int ret = post(w, s);
            if (ret) {
                w->nfree++;
                return soak_err(w, "posting an operation", ret);
            }
            inflight++;
        }
        if (inflight == 0) return 0;
        int got = 0;
        int ret = next_wcs(w, wc, SOAK_MAX_WC, &got);
        if (ret) return ret;
        for (int i = 0; i < got; i++) {
            if (wc[i].wr_id >= (uint64_t)depth) {
                fprintf(stderr, "rpma-perf soak: connection %d: unexpected completion %llu\n",
                        w->idx, (unsigned long long)wc[i].wr_id);
                return -1;
            }
            int s = (int)wc[i].wr_id;
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr,
                        "rpma-perf soak: connection %d: %s of %zu bytes at offset %llu failed "
                        "with status %d\n",
                        w->idx, kind_names[w->slots[s].kind], w->slots[s].len,
                        (unsigned long long)(w->base + w->slots[s].off), (int)wc[i].status);
                return -1;
            }
            complete(w, s);
            w->free_slots[w->nfree++] = s;
        }
        inflight -= got;
        if (atomic_load_explicit(&g_stop, memory_order_relaxed) || perf_now_ns() >= deadline)
            posting = false;
    }
}

static uint64_t g_deadline;

static void *worker_main(void *arg) {
    struct soak_worker *w = arg;
    /* a fresh random window, written and checked before the mix starts */
    rnd_fill(&w->rng, w->shadow, w->win);
    memcpy(w->vbuf, w->shadow, w->win);
    int ret = bulk(w, true);
    if (!ret) ret = check_window(w, "first read-back");
    if (!ret) ret = run(w, g_deadline);
    if (!ret) ret = check_window(w, "final read-back");
    w->err = ret;
    if (ret) atomic_store(&g_stop, true);
    atomic_fetch_add(&g_exited, 1);
    return NULL;
}

/* ---- set-up, in the main thread (conn_req and mr calls are not thread-safe) ---- */

static void *alloc_zero(size_t size) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, size ? size : 1)) return NULL;
    memset(p, 0, size);
    return p;
}

static int setup(struct soak_worker *w, struct rpma_peer *peer, const struct rpma_conn_cfg *cfg) {
    const struct soak_opts *o = w->o;
    int ret, depth = o->iodepth;
    w->rng = o->seed * 0x100000001b3ULL + (uint64_t)w->idx + 1;
    w->lbuf = alloc_zero((size_t)depth * o->max_size);
    w->exp = alloc_zero((size_t)depth * o->max_size);
    w->slots = calloc((size_t)depth, sizeof(*w->slots));
    w->free_slots = calloc((size_t)depth, sizeof(int));
    if (!w->lbuf || !w->exp || !w->slots || !w->free_slots) {
        fprintf(stderr, "rpma-perf soak: out of memory\n");
        return -1;
    }
    for (int s = 0; s < depth; s++) {
        w->slots[s].buf = w->lbuf + (size_t)s * o->max_size;
        w->slots[s].exp = w->exp + (size_t)s * o->max_size;
        w->free_slots[s] = depth - 1 - s;
    }
    w->nfree = depth;
    if ((ret = PERF_CALL(rpma_mr_reg(peer, w->lbuf, (size_t)depth * o->max_size,
                                     RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &w->lmr))))
        return soak_err(w, "cannot register the slots", ret);

    struct perf_hello hello = {
        .magic = PERF_HELLO_MAGIC, .op = OP_WRITE, .msg_size = 8, .depth = (uint32_t)depth};
    if ((ret = perf_connect(peer, o->addr, o->port, cfg, &hello, "soak", w->idx, &w->conn, &w->cq,
                            &w->rmr)))
        return ret;
    int ft = 0;
    if ((ret = rpma_mr_remote_get_flush_type(w->rmr, &ft)))
        return soak_err(w, "rpma_mr_remote_get_flush_type", ret);
    w->persistent_ok = (ft & RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT) != 0;

    if ((ret = rpma_mr_remote_get_size(w->rmr, &w->rsize)))
        return soak_err(w, "rpma_mr_remote_get_size", ret);
    uint64_t per = ((uint64_t)w->rsize / (uint64_t)o->conns) & ~(uint64_t)63;
    w->win = per < o->window ? per : o->window;
    if (w->win < 64) {
        fprintf(stderr, "rpma-perf soak: the server region (%zu bytes) is too small\n", w->rsize);
        return -1;
    }
    w->base = (uint64_t)w->idx * per;
    w->shadow = alloc_zero(w->win);
    w->vbuf = alloc_zero(w->win);
    if (!w->shadow || !w->vbuf) {
        fprintf(stderr, "rpma-perf soak: out of memory\n");
        return -1;
    }
    if ((ret = PERF_CALL(rpma_mr_reg(peer, w->vbuf, w->win,
                                     RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &w->vmr))))
        return soak_err(w, "cannot register the check window", ret);
    return 0;
}

static void teardown(struct soak_worker *w) {
    if (w->rmr) rpma_mr_remote_delete(&w->rmr);
    if (w->conn) {
        if (rpma_conn_disconnect(w->conn) == 0) {
            enum rpma_conn_event ev = perf_wait_event(w->conn, 2000);
            if (ev != RPMA_CONN_CLOSED && ev != RPMA_CONN_LOST)
                fprintf(stderr, "rpma-perf soak: connection %d: no CLOSED after disconnect\n",
                        w->idx);
        }
        rpma_conn_delete(&w->conn);
    }
    if (w->lmr) rpma_mr_dereg(&w->lmr);
    if (w->vmr) rpma_mr_dereg(&w->vmr);
    free(w->lbuf);
    free(w->exp);
    free(w->vbuf);
    free(w->shadow);
    free(w->slots);
    free(w->free_slots);
}

struct soak_total {
    uint64_t ops[K__COUNT], all, written, read, mismatches;
};

static void totals(struct soak_worker *ws, int n, struct soak_total *t) {
    memset(t, 0, sizeof(*t));
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < K__COUNT; k++) t->ops[k] += atomic_load(&ws[i].ops[k]);
        t->written += atomic_load(&ws[i].bytes_written);
        t->read += atomic_load(&ws[i].bytes_read);
        t->mismatches += atomic_load(&ws[i].mismatches);
    }
    for (int k = 0; k < K__COUNT; k++) t->all += t->ops[k];
}

static void status_line(FILE *f, const char *tag, double secs, const struct soak_total *t) {
    fprintf(f,
            "soak %s %7.1f s: %llu ops (write %llu, read %llu, write+flush %llu, flush %llu, "
            "atomic %llu), %.1f MiB written, %.1f MiB read and checked, %llu mismatched\n",
            tag, secs, (unsigned long long)t->all, (unsigned long long)t->ops[K_WRITE],
            (unsigned long long)t->ops[K_READ], (unsigned long long)t->ops[K_WRITE_FLUSH],
            (unsigned long long)t->ops[K_FLUSH], (unsigned long long)t->ops[K_ATOMIC],
            (double)t->written / (1 << 20), (double)t->read / (1 << 20),
            (unsigned long long)t->mismatches);
    fflush(f);
}

int perf_soak(const struct soak_opts *o) {
    atomic_store(&g_stop, false);
    atomic_store(&g_reports, 0);
    atomic_store(&g_exited, 0);
    int ret, rc = 1;
    struct rpma_peer *peer = NULL;
    struct rpma_conn_cfg *cfg = NULL;
    struct soak_worker *ws = calloc((size_t)o->conns, sizeof(*ws));
    int started = 0;
    if (!ws) return 1;
    if (!(peer = perf_peer_new("soak", o->addr, false))) goto out;
    /* a write+flush takes two send-queue slots */
    uint32_t q = (uint32_t)(2 * o->iodepth + 8);
    if ((ret = rpma_conn_cfg_new(&cfg)) || (ret = rpma_conn_cfg_set_sq_size(cfg, q)) ||
        (ret = rpma_conn_cfg_set_cq_size(cfg, q + 8)) ||
        (ret = rpma_conn_cfg_set_timeout(cfg, PERF_EVENT_MS))) {
        soak_err(NULL, "cannot configure the connections", ret);
        goto out;
    }
    for (int i = 0; i < o->conns; i++) {
        ws[i].idx = i;
        ws[i].o = o;
        if (setup(&ws[i], peer, cfg)) goto out;
    }
    printf(
        "rpma-perf soak: %s:%s, %d connections x iodepth %d, operations up to %zu bytes, "
        "windows of %llu bytes, %.0f s, seed %llu\n",
        o->addr, o->port, o->conns, o->iodepth, o->max_size, (unsigned long long)ws[0].win,
        o->time_s, (unsigned long long)o->seed);
    fflush(stdout);

    uint64_t t0 = perf_now_ns();
    g_deadline = t0 + (uint64_t)(o->time_s * 1e9);
    for (; started < o->conns; started++)
        if (pthread_create(&ws[started].thread, NULL, worker_main, &ws[started]) != 0) {
            fprintf(stderr, "rpma-perf soak: cannot start a thread\n");
            atomic_store(&g_stop, true);
            break;
        }

    /* status lines; the stall watchdog */
    uint64_t next = t0 + (uint64_t)(o->interval_s * 1e9), last_hb = 0, since = t0;
    bool stalled = false;
    for (;;) {
        usleep(100000);
        if (atomic_load(&g_exited) == started) break;
        uint64_t now = perf_now_ns();
        uint64_t hb = atomic_load(&g_heartbeat);
        if (hb != last_hb) {
            last_hb = hb;
            since = now;
        } else if (now - since > (uint64_t)PERF_STALL_S * 1000000000ULL) {
            fprintf(stderr, "rpma-perf soak: no completion for %d s; giving up\n", PERF_STALL_S);
            stalled = true;
            break;
        }
        if (now >= next) {
            struct soak_total t;
            totals(ws, o->conns, &t);
            status_line(stdout, "status", (double)(now - t0) / 1e9, &t);
            next += (uint64_t)(o->interval_s * 1e9);
        }
    }
    if (stalled) {
        fflush(stdout);
        _exit(3); /* the workers are stuck in the library: nothing to tear down safely */
    }
    for (int i = 0; i < started; i++) pthread_join(ws[i].thread, NULL);
    struct soak_total t;
    totals(ws, o->conns, &t);
    status_line(stdout, "end", (double)(perf_now_ns() - t0) / 1e9, &t);
    bool failed = false;
    for (int i = 0; i < o->conns; i++)
        if (ws[i].err) failed = true;
    if (t.mismatches) {
        printf(
            "rpma-perf soak: DATA MISMATCH: %llu operations or window checks returned data "
            "that differs from what was written (details on stderr)\n",
            (unsigned long long)t.mismatches);
    } else if (failed) {
        printf(
            "rpma-perf soak: FAILED: an operation failed (see stderr); no data mismatched "
            "before that\n");
    } else {
        printf(
            "rpma-perf soak: no data mismatched (%llu operations, %.1f MiB read and checked, "
            "every window read back whole at the end)\n",
            (unsigned long long)t.all, (double)t.read / (1 << 20));
        rc = 0;
    }
out:
    for (int i = 0; i < o->conns; i++) teardown(&ws[i]);
    rpma_conn_cfg_delete(&cfg);
    if (peer) rpma_peer_delete(&peer);
    free(ws);
    return rc;
}
