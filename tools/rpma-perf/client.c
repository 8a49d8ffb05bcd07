/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c -- the rpma-perf initiator: one thread per connection keeps iodepth operations in
 * flight, timestamps each at posting and at completion, and checks the data at the end.
 *
 * Data check: every word of the server region holds perf_pattern_word(offset). Readers compare
 * what they got with it. Writers first zero their window, then write the pattern back during the
 * run and read the window back at the end, so a lost or misplaced write shows as a mismatch.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"

#define CTX_CTL_SEND ((uint64_t)UINT64_MAX - 1)
#define CTX_CTL_RECV ((uint64_t)UINT64_MAX - 2)
#define CTX_BULK ((uint64_t)UINT64_MAX - 3)
#define CTX_REQ_SEND ((uint64_t)UINT64_MAX - 4) /* gpspm, send-recv: a signaled request */
/* gpspm, send-recv: send queue entries beyond two per operation in flight; every
 * ANSWERED_SQ_SPARE / 4th request is signaled, so that the unsignaled ones before it are
 * reclaimed (as on a verbs send queue) before the queue fills */
#define ANSWERED_SQ_SPARE 40
#define BULK_CHUNK (1u << 20)
#define MAX_WC 64

struct worker {
    int idx;
    const struct client_opts *o;
    pthread_t thread;
    struct rpma_conn *conn;
    struct rpma_cq *cq;
    struct rpma_mr_remote *rmr;
    struct rpma_mr_local *lmr; /* slots * size: sources and destinations of operations */
    char *lbuf;
    struct rpma_mr_local *vmr; /* the window, for zeroing and reading back */
    char *vbuf;
    struct rpma_mr_local *cmr; /* the server's stats answer */
    struct perf_stats *cbuf;
    struct rpma_mr_local *mmr; /* gpspm, send-recv: requests, then the answers' receives */
    char *mbuf;
    size_t asize;            /* bytes per answer slot */
    uint64_t nreq;           /* requests sent */
    uint64_t answered_bytes; /* send-recv: echoed bytes found equal to what was sent */
    size_t size;
    int slots;
    int rslots;    /* distinct remote slots in this connection's window */
    uint64_t base; /* remote offset of the window */
    uint8_t *touched;
    uint64_t *t_post;
    int *free_slots;
    int nfree;
    struct hist lat;
    uint64_t warm_ops;                 /* completed outside the measurement */
    uint64_t ops, bytes, t_end, m_end; /* m_end: t_end by CLOCK_MONOTONIC */
    atomic_uint_fast64_t done;
    int err;
    bool stats_ok;
    struct perf_stats stats;
    bool verified;
    uint64_t verified_bytes;
    char note[96];
};

static pthread_barrier_t g_ready, g_go;
static uint64_t g_t0, g_m0; /* the start by perf_now_ns and by CLOCK_MONOTONIC */
static atomic_int g_finished;
static atomic_bool g_abort;
static atomic_uint_fast64_t g_heartbeat;
static uint64_t g_cpu_u1, g_cpu_s1;

static bool is_write_type(enum perf_op op) {
    return op == OP_WRITE || op == OP_WRITE_FLUSH || op == OP_WRITE_FLUSH_PERSISTENT ||
           op == OP_ATOMIC_WRITE || op == OP_WRITE_IMM || op == OP_GPSPM;
}

static int cl_err(const struct worker *w, const char *what, int ret) {
    return perf_err("client", w ? w->idx : -1, what, ret);
}

/* the next completions; blocking or spinning as asked */
static int next_wcs(struct worker *w, struct ibv_wc *wc, int max, int *got) {
    unsigned spins = 0;
    for (;;) {
        int ret = rpma_cq_get_wc(w->cq, max, wc, got);
        if (ret == 0) {
            atomic_fetch_add_explicit(&g_heartbeat, 1, memory_order_relaxed);
            return 0;
        }
        if (ret != RPMA_E_NO_COMPLETION) return cl_err(w, "rpma_cq_get_wc", ret);
        if (w->o->busy_poll) {
            if ((++spins & 1023) == 0 && atomic_load(&g_abort)) return -1;
            continue;
        }
        ret = rpma_cq_wait(w->cq);
        if (ret && ret != RPMA_E_NO_COMPLETION) return cl_err(w, "rpma_cq_wait", ret);
    }
}

/* waits for the completion with this context (nothing else may be in flight but ctl ops) */
static int wait_ctx(struct worker *w, uint64_t ctx, struct ibv_wc *out) {
    for (;;) {
        struct ibv_wc wc;
        int got = 0, ret = next_wcs(w, &wc, 1, &got);
        if (ret) return ret;
        if (wc.status != IBV_WC_SUCCESS) {
            fprintf(stderr, "rpma-perf client: connection %d: completion failed with status %d\n",
                    w->idx, (int)wc.status);
            return -1;
        }
        if (wc.wr_id == ctx) {
            if (out) *out = wc;
            return 0;
        }
        if (wc.wr_id == CTX_CTL_RECV && out == NULL) {
            /* an early stats answer; keep it */
            w->stats_ok = true;
            continue;
        }
        fprintf(stderr, "rpma-perf client: connection %d: unexpected completion %llu\n", w->idx,
                (unsigned long long)wc.wr_id);
        return -1;
    }
}

static uint64_t remote_off(const struct worker *w, int slot) {
    return w->base + (uint64_t)(slot % w->rslots) * w->size;
}

static int post(struct worker *w, int s) {
    void *ctx = (void *)(uintptr_t)s;
    uint64_t ro = remote_off(w, s);
    size_t lo = (size_t)s * w->size;
    const int A = RPMA_F_COMPLETION_ALWAYS;
    switch (w->o->op) {
        case OP_READ:
            return rpma_read(w->conn, w->lmr, lo, w->rmr, ro, w->size, A, ctx);
        case OP_WRITE:
            return rpma_write(w->conn, w->rmr, ro, w->lmr, lo, w->size, A, ctx);
        case OP_WRITE_FLUSH:
        case OP_WRITE_FLUSH_PERSISTENT: {
            int ret = rpma_write(w->conn, w->rmr, ro, w->lmr, lo, w->size,
                                 RPMA_F_COMPLETION_ON_ERROR, ctx);
            if (ret) return ret;
            return rpma_flush(w->conn, w->rmr, ro, w->size,
                              w->o->op == OP_WRITE_FLUSH ? RPMA_FLUSH_TYPE_VISIBILITY
                                                         : RPMA_FLUSH_TYPE_PERSISTENT,
                              A, ctx);
        }
        case OP_ATOMIC_WRITE:
            return rpma_atomic_write(w->conn, w->rmr, ro, w->lbuf + lo, A, ctx);
        case OP_SEND:
            return rpma_send(w->conn, w->lmr, lo, w->size, A, ctx);
        case OP_WRITE_IMM:
            return rpma_write_with_imm(w->conn, w->rmr, ro, w->lmr, lo, w->size, A, 0, ctx);
        case OP_GPSPM:
        case OP_SEND_RECV: {
            /* the answer's receive first: the operation completes when the answer arrives */
            size_t ans = (size_t)w->slots * PERF_ANSWER_SLOT + (size_t)s * w->asize;
            int ret = rpma_recv(w->conn, w->mmr, ans, w->asize, ctx);
            if (ret) return ret;
            bool sig = w->nreq++ % (ANSWERED_SQ_SPARE / 4) == 0;
            int flags = sig ? RPMA_F_COMPLETION_ALWAYS : RPMA_F_COMPLETION_ON_ERROR;
            void *sctx = sig ? (void *)(uintptr_t)CTX_REQ_SEND : ctx;
            if (w->o->op == OP_SEND_RECV)
                return rpma_send(w->conn, w->lmr, lo, w->size, flags, sctx);
            ret = rpma_write(w->conn, w->rmr, ro, w->lmr, lo, w->size, RPMA_F_COMPLETION_ON_ERROR,
                             ctx);
            if (ret) return ret;
            struct perf_flush_req rq = {
                .offset = ro, .length = (uint32_t)w->size, .slot = (uint32_t)s};
            size_t qo = (size_t)s * PERF_ANSWER_SLOT;
            memcpy(w->mbuf + qo, &rq, sizeof(rq));
            return rpma_send(w->conn, w->mmr, qo, sizeof(rq), flags, sctx);
        }
        default:
            return RPMA_E_INVAL;
    }
}

/* gpspm, send-recv: the answer in slot s is the one for slot s (gpspm: its slot number and
 * status 0; send-recv: the bytes sent) */
static bool answer_ok(struct worker *w, int s, const struct ibv_wc *wc) {
    const char *ans = w->mbuf + (size_t)w->slots * PERF_ANSWER_SLOT + (size_t)s * w->asize;
    if (wc->opcode != IBV_WC_RECV) {
        snprintf(w->note, sizeof(w->note), "completion opcode %d where an answer was due",
                 (int)wc->opcode);
        return false;
    }
    if (w->o->op == OP_GPSPM) {
        struct perf_flush_resp rs;
        memcpy(&rs, ans, sizeof(rs));
        if (wc->byte_len == sizeof(rs) && rs.slot == (uint32_t)s && rs.status == 0) return true;
        snprintf(w->note, sizeof(w->note),
                 "flush answer for slot %u status %u (%u bytes), slot %d due", rs.slot, rs.status,
                 wc->byte_len, s);
        return false;
    }
    if (wc->byte_len == w->size && memcmp(ans, w->lbuf + (size_t)s * w->size, w->size) == 0) {
        w->answered_bytes += w->size;
        return true;
    }
    snprintf(w->note, sizeof(w->note), "the answer to slot %d differs from what was sent", s);
    return false;
}

/* keeps iodepth operations in flight until limit ops were posted or the deadline passed */
static int run_loop(struct worker *w, uint64_t limit, uint64_t deadline, bool record) {
    uint64_t posted = 0;
    int inflight = 0;
    bool stop_posting = false;
    struct ibv_wc wc[MAX_WC];
    /* the stamp of the last completions stands for the next post, as perftest stamps once per
     * operation: a clock read can cost microseconds (an HPET read in a guest) */
    uint64_t stamp = 0;
    for (;;) {
        while (!stop_posting && inflight < w->slots) {
            if (limit && posted >= limit) {
                stop_posting = true;
                break;
            }
            int s = w->free_slots[--w->nfree];
            w->touched[s] = 1;
            w->t_post[s] = stamp ? stamp : perf_now_ns();
            stamp = 0;
            int ret = post(w, s);
            if (ret) {
                w->nfree++;
                return cl_err(w, "posting an operation", ret);
            }
            inflight++;
            posted++;
        }
        if (inflight == 0) break;
        int got = 0;
        int ret = next_wcs(w, wc, MAX_WC, &got);
        if (ret) return ret;
        uint64_t now = perf_now_ns();
        int ndone = 0;
        for (int i = 0; i < got; i++) {
            if (wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == CTX_REQ_SEND) continue;
            ndone++;
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr,
                        "rpma-perf client: connection %d: %s completion failed with status %d\n",
                        w->idx, perf_op_name(w->o->op), (int)wc[i].status);
                return -1;
            }
            if (wc[i].wr_id >= (uint64_t)w->slots) {
                fprintf(stderr, "rpma-perf client: connection %d: unexpected completion %llu\n",
                        w->idx, (unsigned long long)wc[i].wr_id);
                return -1;
            }
            int s = (int)wc[i].wr_id;
            if (perf_op_answered(w->o->op) && !answer_ok(w, s, &wc[i])) {
                fprintf(stderr, "rpma-perf client: connection %d: %s\n", w->idx, w->note);
                return -1;
            }
            if (record) hist_add(&w->lat, now - w->t_post[s]);
            w->free_slots[w->nfree++] = s;
        }
        inflight -= ndone;
        stamp = now;
        if (record) {
            w->ops += (uint64_t)ndone;
            w->bytes += (uint64_t)ndone * w->size;
            atomic_store_explicit(&w->done, w->ops, memory_order_relaxed);
        } else {
            w->warm_ops += (uint64_t)ndone;
        }
        if (deadline && now >= deadline) stop_posting = true;
        if (atomic_load_explicit(&g_abort, memory_order_relaxed)) stop_posting = true;
    }
    return 0;
}

/* moves the window between vbuf and the server in chunks, one at a time */
static int bulk(struct worker *w, bool to_server) {
    size_t win = (size_t)w->rslots * w->size;
    for (size_t off = 0; off < win; off += BULK_CHUNK) {
        size_t n = win - off < BULK_CHUNK ? win - off : BULK_CHUNK;
        void *ctx = (void *)(uintptr_t)CTX_BULK;
        int ret = to_server ? rpma_write(w->conn, w->rmr, w->base + off, w->vmr, off, n,
                                         RPMA_F_COMPLETION_ALWAYS, ctx)
                            : rpma_read(w->conn, w->vmr, off, w->rmr, w->base + off, n,
                                        RPMA_F_COMPLETION_ALWAYS, ctx);
        if (ret)
            return cl_err(
                w, to_server ? "cannot write the check window" : "cannot read the check window",
                ret);
        if ((ret = wait_ctx(w, CTX_BULK, NULL))) return ret;
    }
    return 0;
}

static void verify(struct worker *w) {
    const struct client_opts *o = w->o;
    w->verified = true;
    if (o->op == OP_READ) {
        for (int s = 0; s < w->slots; s++) {
            if (!w->touched[s]) continue;
            long bad = perf_pattern_check(w->lbuf + (size_t)s * w->size, w->size, remote_off(w, s));
            if (bad >= 0) {
                snprintf(w->note, sizeof(w->note), "read data differs at remote offset %llu",
                         (unsigned long long)(remote_off(w, s) + (uint64_t)bad));
                w->verified = false;
                return;
            }
            w->verified_bytes += w->size;
        }
    } else if (is_write_type(o->op)) {
        if (bulk(w, false)) {
            snprintf(w->note, sizeof(w->note), "reading the window back failed");
            w->verified = false;
            return;
        }
        for (int r = 0; r < w->rslots; r++) {
            bool used = false;
            for (int s = r; s < w->slots && !used; s += w->rslots) used = w->touched[s];
            if (!used) continue;
            size_t off = (size_t)r * w->size;
            long bad = perf_pattern_check(w->vbuf + off, w->size, w->base + off);
            if (bad >= 0) {
                snprintf(w->note, sizeof(w->note), "written data differs at remote offset %llu",
                         (unsigned long long)(w->base + off + (uint64_t)bad));
                w->verified = false;
                return;
            }
            w->verified_bytes += w->size;
        }
    }
    if ((o->op == OP_SEND || o->op == OP_WRITE_IMM || perf_op_answered(o->op)) && w->stats_ok) {
        uint64_t sent = w->warm_ops + w->ops;
        if (w->stats.data_msgs != sent) {
            snprintf(w->note, sizeof(w->note), "server received %llu messages, client sent %llu",
                     (unsigned long long)w->stats.data_msgs, (unsigned long long)sent);
            w->verified = false;
            return;
        }
        if (o->op == OP_SEND) w->verified_bytes += w->stats.data_bytes;
        if (o->op == OP_SEND_RECV) w->verified_bytes += w->answered_bytes;
    }
}

static int send_ctl(struct worker *w, uint32_t imm) {
    int ret = rpma_send_with_imm(w->conn, NULL, 0, 0, RPMA_F_COMPLETION_ALWAYS, imm,
                                 (void *)(uintptr_t)CTX_CTL_SEND);
    if (ret) return cl_err(w, "cannot send a control message", ret);
    return wait_ctx(w, CTX_CTL_SEND, NULL);
}

static int post_stats_recv(struct worker *w) {
    int ret = rpma_recv(w->conn, w->cmr, 0, sizeof(*w->cbuf), (void *)(uintptr_t)CTX_CTL_RECV);
    return ret ? cl_err(w, "cannot post the receive for the server's statistics", ret) : 0;
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    const struct client_opts *o = w->o;
    int ret = 0;

    /* the window starts as zeros so that the run must rewrite it */
    if (is_write_type(o->op)) {
        memset(w->vbuf, 0, (size_t)w->rslots * w->size);
        ret = bulk(w, true);
    }
    /* receives complete in order: with answers due, the stats one is posted after the run */
    if (!ret && !perf_op_answered(o->op)) ret = post_stats_recv(w);
    if (!ret) ret = send_ctl(w, PERF_CTL_START);
    if (!ret) {
        uint64_t warm = (uint64_t)(2 * w->slots < 16 ? 16 : 2 * w->slots);
        if (o->count && warm > o->count) warm = o->count;
        ret = run_loop(w, warm, 0, false);
    }
    w->err = ret;
    if (ret) atomic_store(&g_abort, true);
    pthread_barrier_wait(&g_ready);
    pthread_barrier_wait(&g_go);
    if (!w->err && !atomic_load(&g_abort)) {
        uint64_t deadline = o->time_s > 0 ? g_t0 + (uint64_t)(o->time_s * 1e9) : 0;
        w->err = run_loop(w, o->count, deadline, true);
        if (w->err) atomic_store(&g_abort, true);
    }
    w->t_end = perf_now_ns();
    w->m_end = perf_monotonic_ns();
    if (atomic_fetch_add(&g_finished, 1) == o->conns - 1) perf_cpu_ns(&g_cpu_u1, &g_cpu_s1);
    if (w->err) return NULL;

    if (perf_op_answered(o->op) && (ret = post_stats_recv(w))) {
        w->err = ret;
        return NULL;
    }
    if ((ret = send_ctl(w, PERF_CTL_STOP))) {
        w->err = ret;
        return NULL;
    }
    if (!w->stats_ok) {
        struct ibv_wc wc;
        if ((ret = wait_ctx(w, CTX_CTL_RECV, &wc))) {
            w->err = ret;
            return NULL;
        }
        w->stats_ok = true;
    }
    if (w->cbuf->magic == PERF_STATS_MAGIC) {
        w->stats = *w->cbuf;
    } else {
        w->stats_ok = false;
    }
    verify(w);
    return NULL;
}

/* ---- set-up and tear-down, in the main thread (conn_req and mr calls are not thread-safe) ---- */

static void *alloc_zero(size_t size) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, size ? size : 1)) return NULL;
    memset(p, 0, size);
    return p;
}

static int worker_setup(struct worker *w, struct rpma_peer *peer, const struct rpma_conn_cfg *cfg) {
    const struct client_opts *o = w->o;
    int ret;
    w->size = o->size;
    w->slots = o->iodepth;
    hist_init(&w->lat);
    size_t lsize = (size_t)w->slots * w->size;
    w->lbuf = alloc_zero(lsize);
    w->cbuf = alloc_zero(sizeof(*w->cbuf));
    w->touched = calloc((size_t)w->slots, 1);
    w->t_post = calloc((size_t)w->slots, sizeof(uint64_t));
    w->free_slots = calloc((size_t)w->slots, sizeof(int));
    if (!w->lbuf || !w->cbuf || !w->touched || !w->t_post || !w->free_slots) {
        fprintf(stderr, "rpma-perf client: out of memory\n");
        return -1;
    }
    for (int s = 0; s < w->slots; s++) w->free_slots[s] = w->slots - 1 - s;
    w->nfree = w->slots;
    const int lusage = RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_SEND;
    if ((ret = PERF_CALL(rpma_mr_reg(peer, w->lbuf, lsize, lusage, &w->lmr))))
        return cl_err(w, "cannot register the data buffers", ret);
    if ((ret =
             PERF_CALL(rpma_mr_reg(peer, w->cbuf, sizeof(*w->cbuf), RPMA_MR_USAGE_RECV, &w->cmr))))
        return cl_err(w, "cannot register the control buffer", ret);
    if (perf_op_answered(o->op)) {
        w->asize = o->op == OP_SEND_RECV ? (w->size + 63) & ~(size_t)63 : PERF_ANSWER_SLOT;
        size_t msize = (size_t)w->slots * (PERF_ANSWER_SLOT + w->asize);
        if (!(w->mbuf = alloc_zero(msize))) {
            fprintf(stderr, "rpma-perf client: out of memory\n");
            return -1;
        }
        if ((ret = PERF_CALL(rpma_mr_reg(peer, w->mbuf, msize,
                                         RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &w->mmr))))
            return cl_err(w, "cannot register the message buffers", ret);
    }

    struct perf_hello hello = {.magic = PERF_HELLO_MAGIC,
                               .op = (uint32_t)o->op,
                               .msg_size = (uint32_t)w->size,
                               .depth = (uint32_t)w->slots,
                               .flags = o->server_poll ? PERF_HELLO_SERVER_POLL : 0};
    if ((ret = perf_connect(peer, o->addr, o->port, cfg, &hello, "client", w->idx, &w->conn, &w->cq,
                            &w->rmr)))
        return ret;

    /* each connection owns a disjoint window of the region */
    size_t rsize = 0;
    if ((ret = rpma_mr_remote_get_size(w->rmr, &rsize)))
        return cl_err(w, "rpma_mr_remote_get_size", ret);
    size_t per = (rsize / (size_t)o->conns) & ~(size_t)63;
    size_t fit = per / w->size;
    if (fit == 0) {
        fprintf(stderr,
                "rpma-perf client: the server region (%zu bytes) is too small for %d x %zu bytes\n",
                rsize, o->conns, w->size);
        return -1;
    }
    w->rslots = fit < (size_t)w->slots ? (int)fit : w->slots;
    w->base = (uint64_t)w->idx * per;
    size_t win = (size_t)w->rslots * w->size;
    w->vbuf = alloc_zero(win);
    if (!w->vbuf) {
        fprintf(stderr, "rpma-perf client: out of memory\n");
        return -1;
    }
    if ((ret = PERF_CALL(rpma_mr_reg(peer, w->vbuf, win,
                                     RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &w->vmr))))
        return cl_err(w, "cannot register the check window", ret);
    /* sources hold what the server region holds at their target */
    if (o->op != OP_READ)
        for (int s = 0; s < w->slots; s++)
            perf_pattern_fill(w->lbuf + (size_t)s * w->size, w->size, remote_off(w, s));
    return 0;
}

static void worker_teardown(struct worker *w) {
    if (w->rmr) rpma_mr_remote_delete(&w->rmr);
    if (w->conn) {
        if (rpma_conn_disconnect(w->conn) == 0) {
            enum rpma_conn_event ev = perf_wait_event(w->conn, 2000);
            if (ev != RPMA_CONN_CLOSED && ev != RPMA_CONN_LOST)
                fprintf(stderr, "rpma-perf client: connection %d: no CLOSED after disconnect\n",
                        w->idx);
        }
        rpma_conn_delete(&w->conn);
    }
    if (w->lmr) rpma_mr_dereg(&w->lmr);
    if (w->vmr) rpma_mr_dereg(&w->vmr);
    if (w->cmr) rpma_mr_dereg(&w->cmr);
    if (w->mmr) rpma_mr_dereg(&w->mmr);
    free(w->mbuf);
    free(w->lbuf);
    free(w->vbuf);
    free(w->cbuf);
    free(w->touched);
    free(w->t_post);
    free(w->free_slots);
}

/* the watchdog: a run that stops completing anything ends the process */
static void *watchdog_main(void *arg) {
    atomic_bool *done = arg;
    uint64_t last = atomic_load(&g_heartbeat), since = perf_now_ns();
    while (!atomic_load(done)) {
        usleep(100000);
        uint64_t hb = atomic_load(&g_heartbeat);
        uint64_t now = perf_now_ns();
        if (hb != last) {
            last = hb;
            since = now;
        } else if (now - since > (uint64_t)PERF_STALL_S * 1000000000ULL) {
            fprintf(stderr, "\nrpma-perf client: no completion for %d s; giving up\n",
                    PERF_STALL_S);
            fflush(stderr);
            _exit(3);
        }
    }
    return NULL;
}

static void progress_line(struct worker *ws, int n, const struct client_opts *o, bool final) {
    uint64_t ops = 0;
    for (int i = 0; i < n; i++) ops += atomic_load_explicit(&ws[i].done, memory_order_relaxed);
    double t = (double)(perf_now_ns() - g_t0) / 1e9;
    if (t <= 0) t = 1e-9;
    double bw = (double)ops * (double)o->size / t / (1 << 20);
    fprintf(stderr, "\r  %-22s %6.1f s  %10.1f MiB/s  %10.0f IOPS%s", perf_op_name(o->op), t, bw,
            (double)ops / t, final ? "\r\033[K" : "");
    fflush(stderr);
}

int perf_client(const struct client_opts *o, struct client_result *r) {
    memset(r, 0, sizeof(*r));
    hist_init(&r->lat);
    atomic_store(&g_finished, 0);
    atomic_store(&g_abort, false);
    int ret, rc = 1;
    struct rpma_peer *peer = NULL;
    struct rpma_conn_cfg *cfg = NULL;
    struct worker *ws = calloc((size_t)o->conns, sizeof(*ws));
    atomic_bool wd_done = false;
    pthread_t wd;
    bool wd_started = false;
    if (!ws) return 1;

    if (!(peer = perf_peer_new("client", o->addr, false))) goto out;
    uint32_t q = (uint32_t)(2 * o->iodepth + (perf_op_answered(o->op) ? ANSWERED_SQ_SPARE : 8));
    if ((ret = rpma_conn_cfg_new(&cfg)) || (ret = rpma_conn_cfg_set_sq_size(cfg, q)) ||
        (ret = rpma_conn_cfg_set_cq_size(cfg, q + 8)) ||
        /* gpspm, send-recv: a receive per operation in flight for its answer */
        (ret = rpma_conn_cfg_set_rq_size(cfg, perf_op_answered(o->op) ? q : 4)) ||
        (ret = rpma_conn_cfg_set_timeout(cfg, PERF_EVENT_MS))) {
        cl_err(NULL, "cannot configure the connections", ret);
        goto out;
    }
    for (int i = 0; i < o->conns; i++) {
        ws[i].idx = i;
        ws[i].o = o;
        if (worker_setup(&ws[i], peer, cfg)) goto out;
    }

    if (pthread_create(&wd, NULL, watchdog_main, &wd_done) == 0) wd_started = true;
    pthread_barrier_init(&g_ready, NULL, (unsigned)o->conns + 1);
    pthread_barrier_init(&g_go, NULL, (unsigned)o->conns + 1);
    for (int i = 0; i < o->conns; i++) {
        if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]) != 0) {
            /* the barrier counts every thread: without this one nobody could go on */
            fprintf(stderr, "rpma-perf client: cannot start a thread\n");
            _exit(3);
        }
    }
    pthread_barrier_wait(&g_ready);
    uint64_t u0, s0;
    perf_cpu_ns(&u0, &s0);
    g_t0 = perf_now_ns();
    g_m0 = perf_monotonic_ns();
    pthread_barrier_wait(&g_go);

    uint64_t last_print = 0;
    while (atomic_load(&g_finished) < o->conns) {
        usleep(20000);
        uint64_t now = perf_now_ns();
        if (o->progress && now - last_print >= 500000000ULL) {
            progress_line(ws, o->conns, o, false);
            last_print = now;
        }
    }
    if (o->progress && last_print) progress_line(ws, o->conns, o, true);
    for (int i = 0; i < o->conns; i++) pthread_join(ws[i].thread, NULL);
    pthread_barrier_destroy(&g_ready);
    pthread_barrier_destroy(&g_go);

    uint64_t t_end = 0, m_end = 0;
    bool ok = true;
    r->verified = true;
    for (int i = 0; i < o->conns; i++) {
        struct worker *w = &ws[i];
        if (w->err) ok = false;
        if (w->t_end > t_end) t_end = w->t_end;
        if (w->m_end > m_end) m_end = w->m_end;
        r->ops += w->ops;
        r->bytes += w->bytes;
        hist_merge(&r->lat, &w->lat);
        if (w->stats_ok) {
            /* sessions of one server process overlap: its CPU over the run is the largest */
            double cpu = (double)(w->stats.cpu_user_ns + w->stats.cpu_sys_ns) / 1e9;
            if (!r->server_cpu_known || cpu > r->server_cpu_s) r->server_cpu_s = cpu;
            r->server_cpu_known = true;
        }
        if (!w->verified) {
            r->verified = false;
            if (!r->verify_note[0]) snprintf(r->verify_note, sizeof(r->verify_note), "%s", w->note);
        }
        r->verified_bytes += w->verified_bytes;
    }
    r->seconds = (double)(t_end - g_t0) / 1e9;
    r->seconds_monotonic = (double)(m_end - g_m0) / 1e9;
    r->client_cpu_s = (double)(g_cpu_u1 - u0 + g_cpu_s1 - s0) / 1e9;
    if (!ok) goto out;
    if (!r->verified) {
        fprintf(stderr, "rpma-perf client: DATA CHECK FAILED: %s\n", r->verify_note);
        goto out;
    }
    rc = 0;
out:
    atomic_store(&wd_done, true);
    if (wd_started) pthread_join(wd, NULL);
    for (int i = 0; i < o->conns; i++) worker_teardown(&ws[i]);
    rpma_conn_cfg_delete(&cfg);
    if (peer) rpma_peer_delete(&peer);
    free(ws);
    return rc;
}
