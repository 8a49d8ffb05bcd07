/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.c -- the rpma-perf target: one region with every remote usage, filled with the pattern;
 * each accepted connection gets a session thread that reposts receives (send, write-imm) and
 * answers the client's STOP with the server's CPU time for the session.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf.h"

/* receives a session keeps posted: enough for the client's depth, bounded */
#define SRV_RQ_MAX 512
#define SRV_CTL_SLOTS 4
#define SRV_MIN_SLOT 64

static atomic_bool g_stop;
static atomic_int g_sessions;
/* mr_reg/dereg and the ep/conn_req calls are not thread-safe: serialise them */
static pthread_mutex_t g_api_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

static void on_signal(int sig) {
    (void)sig;
    atomic_store(&g_stop, true);
}

struct session {
    int id;
    bool verbose;
    struct rpma_conn *conn;
    struct rpma_mr_local *rmr; /* receive slots */
    char *rbuf;
    size_t slot_size;
    int slots;
    struct rpma_mr_local *smr; /* the stats answer */
    struct perf_stats *stats;
    enum perf_op op;
    bool poll;                 /* gpspm, send-recv: busy-poll rather than wait */
    struct rpma_mr_local *amr; /* gpspm, send-recv: an answer per receive slot */
    char *abuf;
    uint64_t nanswers;
    bool stopped;   /* the client's STOP came: the run ended as it should */
    bool wc_failed; /* a failed completion was reported (one line per session) */
};
/* every so many answers is signaled, so that the unsignaled ones are reclaimed */
#define SRV_ANSWER_SIGNAL 8

/* what a session counts between the client's START and STOP */
struct tally {
    bool started;
    uint64_t u0, s0, t0, msgs, bytes;
};

static int srv_err(int id, const char *what, int ret) {
    char who[32];
    snprintf(who, sizeof(who), "server: session %d", id);
    return perf_err(who, -1, what, ret);
}

static void session_free(struct session *s) {
    pthread_mutex_lock(&g_api_lock);
    if (s->rmr) rpma_mr_dereg(&s->rmr);
    if (s->smr) rpma_mr_dereg(&s->smr);
    if (s->amr) rpma_mr_dereg(&s->amr);
    pthread_mutex_unlock(&g_api_lock);
    free(s->abuf);
    free(s->rbuf);
    free(s->stats);
    free(s);
}

/* waits for one connection event, bounded; RPMA_CONN_UNDEFINED on timeout or stop */
static enum rpma_conn_event wait_event(struct rpma_conn *conn, int timeout_ms) {
    int fd = -1;
    if (rpma_conn_get_event_fd(conn, &fd)) return RPMA_CONN_UNDEFINED;
    uint64_t deadline = perf_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    while (!atomic_load(&g_stop) && perf_now_ns() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, 200);
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
        int ret = rpma_conn_next_event(conn, &ev);
        if (ret == RPMA_E_NO_EVENT) continue;
        return ret ? RPMA_CONN_LOST : ev;
    }
    return RPMA_CONN_UNDEFINED;
}

static _Atomic uint64_t g_persist_barrier;

/* gpspm, send-recv: the application's work on a request, then the receive re-posted, then the
 * answer sent: gpspm "persists" the range (a fence: the region is DRAM or a shared file mapping,
 * so there is no cache line to flush that a pmem library would) and answers with its slot;
 * send-recv answers with the bytes it got */
static int answer(struct session *s, uintptr_t slot, const struct ibv_wc *wc) {
    const char *in = s->rbuf + slot * s->slot_size;
    char *out = s->abuf + slot * s->slot_size;
    size_t n = wc->byte_len;
    if (s->op == OP_GPSPM) {
        struct perf_flush_req rq = {0};
        memcpy(&rq, in, n < sizeof(rq) ? n : sizeof(rq));
        /* a full barrier by a seq_cst store (GCC's TSan rejects atomic_thread_fence) */
        atomic_store_explicit(&g_persist_barrier, rq.slot, memory_order_seq_cst);
        struct perf_flush_resp rs = {.slot = rq.slot, .status = n == sizeof(rq) ? 0 : 1};
        memcpy(out, &rs, sizeof(rs));
        n = sizeof(rs);
    } else {
        memcpy(out, in, n);
    }
    int ret = rpma_recv(s->conn, s->rmr, slot * s->slot_size, s->slot_size, (void *)slot);
    if (ret && ret != RPMA_E_PROVIDER) srv_err(s->id, "rpma_recv", ret);
    int flags = s->nanswers++ % SRV_ANSWER_SIGNAL == 0 ? RPMA_F_COMPLETION_ALWAYS
                                                       : RPMA_F_COMPLETION_ON_ERROR;
    ret = rpma_send(s->conn, s->amr, slot * s->slot_size, n, flags, NULL);
    if (ret && ret != RPMA_E_PROVIDER) srv_err(s->id, "rpma_send(answer)", ret);
    return ret;
}

/* the line a session ends with: what the server saw of the client's run, by operation */
static void session_summary(const struct session *s, const struct tally *t,
                            const struct perf_stats *st) {
    char seen[96];
    if (s->op == OP_GPSPM || s->op == OP_SEND_RECV)
        snprintf(seen, sizeof(seen), "%llu requests answered (warm-up included)",
                 (unsigned long long)t->msgs);
    else if (s->op == OP_SEND || s->op == OP_WRITE_IMM)
        snprintf(seen, sizeof(seen), "%llu messages, %.1f MiB received (warm-up included)",
                 (unsigned long long)t->msgs, (double)t->bytes / (1 << 20));
    else /* reads, writes, flushes and atomic writes never reach the application */
        snprintf(seen, sizeof(seen), "one-sided: served by the library, unseen by this program");
    printf("session %d: %s done in %.3f s, server CPU %.3f s; %s\n", s->id, perf_op_name(s->op),
           (double)st->wall_ns / 1e9, (double)(st->cpu_user_ns + st->cpu_sys_ns) / 1e9, seen);
}

/* one completion; 1 when it was the client's STOP, -1 when it failed, else 0 */
static int handle_wc(struct session *s, struct tally *t, const struct ibv_wc *wc) {
    if (wc->status != IBV_WC_SUCCESS) {
        /* receives still posted when the connection closes come back flushed: expected, and
         * after anything else the queue flushes too, so one line says all */
        if (wc->status != IBV_WC_WR_FLUSH_ERR && !s->wc_failed) {
            s->wc_failed = true;
            fprintf(stderr, "rpma-perf server: session %d: a %s failed with completion status %d\n",
                    s->id, wc->opcode == IBV_WC_SEND ? "send" : "receive", (int)wc->status);
        }
        return -1;
    }
    if (wc->opcode == IBV_WC_SEND) return 0; /* our stats answer went out */
    uintptr_t slot = (uintptr_t)wc->wr_id;
    bool imm = (wc->wc_flags & IBV_WC_WITH_IMM) != 0;
    uint32_t v = imm ? ntohl(wc->imm_data) : 0;
    int rc = 0, ret;
    if (wc->opcode == IBV_WC_RECV && imm && v == PERF_CTL_START) {
        perf_cpu_ns(&t->u0, &t->s0);
        t->t0 = perf_now_ns();
        t->msgs = t->bytes = 0;
        t->started = true;
    } else if (wc->opcode == IBV_WC_RECV && imm && v == PERF_CTL_STOP) {
        uint64_t u1, s1;
        perf_cpu_ns(&u1, &s1);
        uint64_t t1 = perf_now_ns();
        struct perf_stats st = {
            .magic = PERF_STATS_MAGIC,
            .cpu_user_ns = t->started ? u1 - t->u0 : 0,
            .cpu_sys_ns = t->started ? s1 - t->s0 : 0,
            .wall_ns = t->started ? t1 - t->t0 : 0,
            .data_msgs = t->msgs,
            .data_bytes = t->bytes,
        };
        *s->stats = st;
        ret = rpma_send(s->conn, s->smr, 0, sizeof(st), RPMA_F_COMPLETION_ALWAYS, NULL);
        if (ret) srv_err(s->id, "rpma_send(stats)", ret);
        if (s->verbose) session_summary(s, t, &st);
        s->stopped = true;
        rc = 1;
    } else {
        t->msgs++;
        t->bytes += wc->byte_len;
        if (wc->opcode == IBV_WC_RECV && perf_op_answered(s->op)) {
            answer(s, slot, wc);
            return 0;
        }
    }
    ret = rpma_recv(s->conn, s->rmr, slot * s->slot_size, s->slot_size, (void *)slot);
    if (ret && ret != RPMA_E_PROVIDER) srv_err(s->id, "rpma_recv", ret);
    return rc;
}

/* gpspm, send-recv until the client's STOP: the session thread gets its receives as an
 * application would, waiting in rpma_cq_wait or spinning on rpma_cq_get_wc, and answers each;
 * the poll loop takes over for the rest (the stats answer's completion, the close) */
static void answer_loop(struct session *s, struct rpma_cq *cq, struct tally *t) {
    struct ibv_wc wc[32];
    unsigned spins = 0;
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        int got = 0;
        int ret = rpma_cq_get_wc(cq, 32, wc, &got);
        if (ret == RPMA_E_NO_COMPLETION) {
            if (s->poll) {
                if ((++spins & 1023) == 0 && atomic_load(&g_stop)) return;
                continue;
            }
            ret = rpma_cq_wait(cq);
            if (ret && ret != RPMA_E_NO_COMPLETION) {
                srv_err(s->id, "rpma_cq_wait", ret);
                return;
            }
            continue;
        }
        if (ret) {
            srv_err(s->id, "rpma_cq_get_wc", ret);
            return;
        }
        int end = 0;
        for (int i = 0; i < got; i++) {
            int r = handle_wc(s, t, &wc[i]);
            if (r) end = r;
        }
        if (end) return;
    }
}

static void *session_main(void *arg) {
    struct session *s = arg;
    struct rpma_cq *cq = NULL;
    int cq_fd = -1, ev_fd = -1, ret;
    bool closed = false;
    struct tally t = {0};

    if (wait_event(s->conn, PERF_EVENT_MS) != RPMA_CONN_ESTABLISHED) {
        fprintf(stderr, "rpma-perf server: session %d: the connection was not established\n",
                s->id);
        goto out;
    }
    if (s->verbose) printf("session %d: a client runs %s\n", s->id, perf_op_name(s->op));
    if ((ret = rpma_conn_get_cq(s->conn, &cq)) || (ret = rpma_cq_get_fd(cq, &cq_fd)) ||
        (ret = rpma_conn_get_event_fd(s->conn, &ev_fd))) {
        srv_err(s->id, "conn getters", ret);
        goto out;
    }
    /* slot 0 was posted on the request */
    for (int i = 1; i < s->slots; i++)
        if ((ret = rpma_recv(s->conn, s->rmr, (size_t)i * s->slot_size, s->slot_size,
                             (void *)(uintptr_t)i))) {
            srv_err(s->id, "rpma_recv", ret);
            goto out;
        }
    if (perf_op_answered(s->op)) answer_loop(s, cq, &t);

    while (!closed && !atomic_load(&g_stop)) {
        struct pollfd p[2] = {{.fd = cq_fd, .events = POLLIN}, {.fd = ev_fd, .events = POLLIN}};
        int n = poll(p, 2, 200);
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        if (p[0].revents) {
            ret = rpma_cq_wait(cq);
            if (ret && ret != RPMA_E_NO_COMPLETION) {
                srv_err(s->id, "rpma_cq_wait", ret);
                break;
            }
            struct ibv_wc wc[32];
            int got = 0;
            while ((ret = rpma_cq_get_wc(cq, 32, wc, &got)) == 0)
                for (int i = 0; i < got; i++) handle_wc(s, &t, &wc[i]);
            if (ret != RPMA_E_NO_COMPLETION) {
                srv_err(s->id, "rpma_cq_get_wc", ret);
                break;
            }
        }
        if (p[1].revents) {
            enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
            ret = rpma_conn_next_event(s->conn, &ev);
            if (ret == RPMA_E_NO_EVENT) continue;
            if (ret || ev == RPMA_CONN_CLOSED || ev == RPMA_CONN_LOST) closed = true;
            if (closed && !s->stopped && !atomic_load(&g_stop))
                fprintf(stderr, "rpma-perf server: session %d: the client left mid-run (%s)\n",
                        s->id, ret ? "connection lost" : rpma_utils_conn_event_2str(ev));
        }
    }
out:
    rpma_conn_disconnect(s->conn);
    if (!closed) wait_event(s->conn, 1000);
    pthread_mutex_lock(&g_api_lock);
    rpma_conn_delete(&s->conn);
    pthread_mutex_unlock(&g_api_lock);
    session_free(s);
    atomic_fetch_sub(&g_sessions, 1);
    return NULL;
}

struct server_ctx {
    const struct server_opts *o;
    struct rpma_peer *peer;
    struct perf_welcome welcome;
    size_t welcome_len;
    int next_id;
};

/* builds a session for one request and accepts it; the request is consumed either way */
static void accept_one(struct server_ctx *c, struct rpma_conn_req *req) {
    struct rpma_conn_private_data pd = {0};
    struct perf_hello hello = {0};
    int ret = rpma_conn_req_get_private_data(req, &pd);
    /* clients from before the flags field send a shorter hello: its flags stay 0 */
    if (ret == 0 && pd.ptr && pd.len >= offsetof(struct perf_hello, flags))
        memcpy(&hello, pd.ptr, pd.len < sizeof(hello) ? pd.len : sizeof(hello));
    if (hello.magic != PERF_HELLO_MAGIC || hello.op >= OP__COUNT) {
        fprintf(stderr, "rpma-perf server: rejecting a client that is not rpma-perf\n");
        rpma_conn_req_delete(&req);
        return;
    }
    struct session *s = calloc(1, sizeof(*s));
    if (!s) {
        rpma_conn_req_delete(&req);
        return;
    }
    s->id = ++c->next_id;
    s->verbose = c->o->verbose;
    int depth = hello.depth < SRV_RQ_MAX ? (int)hello.depth : SRV_RQ_MAX;
    s->op = (enum perf_op)hello.op;
    s->poll = (hello.flags & PERF_HELLO_SERVER_POLL) != 0;
    bool data_recv = hello.op == OP_SEND || hello.op == OP_WRITE_IMM || perf_op_answered(s->op);
    s->slots = SRV_CTL_SLOTS + (data_recv ? depth : 0);
    if (s->slots > SRV_RQ_MAX) s->slots = SRV_RQ_MAX;
    s->slot_size = SRV_MIN_SLOT;
    if ((hello.op == OP_SEND || hello.op == OP_SEND_RECV) && hello.msg_size > s->slot_size)
        s->slot_size = hello.msg_size;
    if (posix_memalign((void **)&s->rbuf, 4096, s->slot_size * (size_t)s->slots) ||
        posix_memalign((void **)&s->stats, 64, sizeof(*s->stats))) {
        fprintf(stderr, "rpma-perf server: out of memory for session %d\n", s->id);
        rpma_conn_req_delete(&req);
        session_free(s);
        return;
    }
    if (perf_op_answered(s->op) &&
        posix_memalign((void **)&s->abuf, 4096, s->slot_size * (size_t)s->slots)) {
        fprintf(stderr, "rpma-perf server: out of memory for session %d\n", s->id);
        rpma_conn_req_delete(&req);
        session_free(s);
        return;
    }
    if (s->abuf) memset(s->abuf, 0, s->slot_size * (size_t)s->slots);
    memset(s->rbuf, 0, s->slot_size * (size_t)s->slots);
    memset(s->stats, 0, sizeof(*s->stats));
    pthread_mutex_lock(&g_api_lock);
    ret =
        rpma_mr_reg(c->peer, s->rbuf, s->slot_size * (size_t)s->slots, RPMA_MR_USAGE_RECV, &s->rmr);
    if (ret == 0)
        ret = rpma_mr_reg(c->peer, s->stats, sizeof(*s->stats), RPMA_MR_USAGE_SEND, &s->smr);
    if (ret == 0 && s->abuf)
        ret = rpma_mr_reg(c->peer, s->abuf, s->slot_size * (size_t)s->slots, RPMA_MR_USAGE_SEND,
                          &s->amr);
    pthread_mutex_unlock(&g_api_lock);
    if (ret) {
        srv_err(s->id, "rpma_mr_reg", ret);
        rpma_conn_req_delete(&req);
        session_free(s);
        return;
    }
    /* one receive before accepting, so that the client's START never waits */
    ret = rpma_conn_req_recv(req, s->rmr, 0, s->slot_size, (void *)(uintptr_t)0);
    if (ret) {
        srv_err(s->id, "rpma_conn_req_recv", ret);
        rpma_conn_req_delete(&req);
        session_free(s);
        return;
    }
    struct rpma_conn_private_data out = {.ptr = &c->welcome, .len = (uint8_t)c->welcome_len};
    ret = rpma_conn_req_connect(&req, &out, &s->conn);
    if (ret) {
        srv_err(s->id, "rpma_conn_req_connect", ret);
        session_free(s);
        return;
    }
    atomic_fetch_add(&g_sessions, 1);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, session_main, s) != 0) {
        fprintf(stderr, "rpma-perf server: cannot start a session thread\n");
        rpma_conn_disconnect(s->conn);
        rpma_conn_delete(&s->conn);
        session_free(s);
        atomic_fetch_sub(&g_sessions, 1);
    }
    pthread_attr_destroy(&attr);
}

static void report_ready(int fd, int port) {
    if (fd < 0) return;
    ssize_t w;
    do w = write(fd, &port, sizeof(port));
    while (w < 0 && errno == EINTR);
    close(fd);
}

/* the region: a file mapping (--pmem) or anonymous memory */
static void *region_map(const struct server_opts *o, size_t *mapped, int *err) {
    if (!o->pmem) {
        void *p = mmap(NULL, o->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            *err = errno;
            return NULL;
        }
        *mapped = o->size;
        return p;
    }
    int fd = open(o->pmem, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        *err = errno;
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) || ((size_t)st.st_size < o->size && ftruncate(fd, (off_t)o->size))) {
        *err = errno;
        close(fd);
        return NULL;
    }
    /* MAP_SYNC would be the DAX way; a plain shared mapping works on any file system */
    void *p = mmap(NULL, o->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    *err = errno;
    close(fd);
    if (p == MAP_FAILED) return NULL;
    *mapped = o->size;
    return p;
}

int perf_server(const struct server_opts *o) {
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int rc = 1, ret, err = 0;
    size_t mapped = 0;
    struct server_ctx c = {.o = o};
    struct rpma_mr_local *mr = NULL;
    struct rpma_peer_cfg *pcfg = NULL;
    struct rpma_ep *ep = NULL;
    struct rpma_conn_cfg *cfg = NULL;
    char port[16];

    void *region = region_map(o, &mapped, &err);
    if (!region) {
        fprintf(stderr, "rpma-perf server: cannot map %zu bytes%s%s: %s\n", o->size,
                o->pmem ? " of " : "", o->pmem ? o->pmem : "", strerror(err));
        report_ready(o->ready_fd, 0);
        return 1;
    }
    /* readers check what they get against this; writers write the same words back */
    perf_pattern_fill(region, mapped, 0);

#define SRV_TRY(call)                                   \
    do {                                                \
        if ((ret = PERF_CALL(call))) {                  \
            perf_err("server", -1, why_fn(#call), ret); \
            goto out;                                   \
        }                                               \
    } while (0)

    if (!(c.peer = perf_peer_new("server", o->addr, true))) goto out;
    SRV_TRY(rpma_mr_reg(c.peer, region, mapped,
                        RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST |
                            RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
                            RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT,
                        &mr));
    SRV_TRY(rpma_peer_cfg_new(&pcfg));
    SRV_TRY(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true));
    size_t msz = 0, psz = 0;
    SRV_TRY(rpma_mr_get_descriptor_size(mr, &msz));
    SRV_TRY(rpma_peer_cfg_get_descriptor_size(pcfg, &psz));
    if (msz + psz > sizeof(c.welcome.desc)) {
        fprintf(stderr, "rpma-perf server: descriptors too large (%zu + %zu)\n", msz, psz);
        goto out;
    }
    c.welcome.mr_desc_size = (uint8_t)msz;
    c.welcome.pcfg_desc_size = (uint8_t)psz;
    SRV_TRY(rpma_mr_get_descriptor(mr, c.welcome.desc));
    SRV_TRY(rpma_peer_cfg_get_descriptor(pcfg, c.welcome.desc + msz));
    c.welcome_len = 2 + msz + psz;

    SRV_TRY(rpma_conn_cfg_new(&cfg));
    SRV_TRY(rpma_conn_cfg_set_rq_size(cfg, SRV_RQ_MAX));
    /* gpspm and send-recv answer every receive, most unsignaled: room for a full receive queue
     * and the unsignaled answers before a signaled one */
    SRV_TRY(rpma_conn_cfg_set_sq_size(cfg, SRV_RQ_MAX + 16));
    SRV_TRY(rpma_conn_cfg_set_cq_size(cfg, SRV_RQ_MAX + 16));

    int p0 = atoi(o->port), tries = o->port_tries > 0 ? o->port_tries : 1;
    for (int i = 0; i < tries; i++) {
        snprintf(port, sizeof(port), "%d", p0 + i);
        ret = PERF_CALL(rpma_ep_listen(c.peer, o->addr, port, &ep));
        if (ret == 0 || ret != RPMA_E_PROVIDER) break;
    }
    if (ret) {
        char what[300];
        snprintf(what, sizeof(what), "cannot listen on %s:%s", o->addr, port);
        if (tries > 1)
            fprintf(stderr, "rpma-perf server: no free port from %s to %s; the last one:\n",
                    o->port, port);
        perf_err("server", -1, what, ret);
        goto out;
    }
    if (o->verbose)
        printf("rpma-perf server: listening on %s:%s, region %zu bytes%s%s\n", o->addr, port,
               mapped, o->pmem ? " mapped from " : " of anonymous memory", o->pmem ? o->pmem : "");
    fflush(stdout);
    report_ready(o->ready_fd, atoi(port));

    int ep_fd = -1;
    SRV_TRY(rpma_ep_get_fd(ep, &ep_fd));
    while (!atomic_load(&g_stop)) {
        struct pollfd p = {.fd = ep_fd, .events = POLLIN};
        int n = poll(&p, 1, 200);
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        struct rpma_conn_req *req = NULL;
        pthread_mutex_lock(&g_api_lock);
        ret = rpma_ep_next_conn_req(ep, cfg, &req);
        pthread_mutex_unlock(&g_api_lock);
        if (ret == RPMA_E_NO_EVENT) continue;
        if (ret) {
            fprintf(stderr, "rpma-perf server: rpma_ep_next_conn_req: %s\n", rpma_err_2str(ret));
            continue;
        }
        pthread_mutex_lock(&g_api_lock);
        accept_one(&c, req);
        pthread_mutex_unlock(&g_api_lock);
    }
    rc = 0;
out:
    if (o->ready_fd >= 0 && !ep) report_ready(o->ready_fd, 0);
    /* sessions see the stop flag within their poll period */
    for (int i = 0; i < 50 && atomic_load(&g_sessions) > 0; i++) usleep(100000);
    if (atomic_load(&g_sessions) > 0) {
        fprintf(stderr, "rpma-perf server: %d sessions did not end\n", atomic_load(&g_sessions));
        return 1;
    }
    if (ep) rpma_ep_shutdown(&ep);
    rpma_conn_cfg_delete(&cfg);
    rpma_peer_cfg_delete(&pcfg);
    if (mr) rpma_mr_dereg(&mr);
    if (c.peer) rpma_peer_delete(&c.peer);
    munmap(region, mapped);
    return rc;
}
