/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rpma_demo.c -- one real round of remote persistent memory access over loopback.
 *
 * The process forks. The child is the target: it exposes a 1 MiB region, writable, readable and
 * flushable to persistence, and hands its descriptor plus its peer configuration to the client
 * as private data. The parent is the initiator: it writes a pattern, flushes it (PERSISTENT),
 * reads it back, checks it, and prints the average latencies and a 64 KiB write bandwidth.
 *
 * Usage: rpma_demo [iterations]     (default 1000)
 * Exit status: 0 only if every step succeeded and every byte read back matched.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <librpma.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ADDR "127.0.0.1"
#define REGION_SIZE (1u << 20)
#define BW_BLOCK (64u << 10)
#define BW_TOTAL (64u << 20)
#define BW_BATCH 8 /* writes per signalled completion */
#define SIGNATURE_LEN 4096
#define PORT_TRIES 64
#define DEADLINE_S 120 /* neither process may outlive this, whatever happens to the other */

/* private data layout chosen by this demo: two sizes, then the two descriptors */
struct server_info {
    uint8_t mr_desc_size;
    uint8_t pcfg_desc_size;
    uint8_t descriptors[64];
};

static const char *who = "client";

/* reports a failed call; NOSUPP gets an explicit word, as it means "not implemented yet" */
static int failed(const char *call, int ret) {
    fprintf(stderr, "rpma_demo [%s]: %s failed: %s (%d)\n", who, call, rpma_err_2str(ret), ret);
    if (ret == RPMA_E_NOSUPP)
        fprintf(stderr,
                "rpma_demo [%s]: this librpma build does not support this call yet "
                "(no transport provider?); the demo cannot run\n",
                who);
    return ret;
}

#define TRY(call)                             \
    do {                                      \
        int ret_ = (call);                    \
        if (ret_) return failed(#call, ret_); \
    } while (0)

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void fill(uint8_t *p, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; i++) p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

static void *alloc_region(size_t size) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, size)) return NULL;
    memset(p, 0, size);
    return p;
}

/* ---- target (child) ---- */

/* tells the parent which port we listen on; 0 means we failed before listening */
static void report_port(int fd, int port) {
    ssize_t w;
    do {
        w = write(fd, &port, sizeof(port));
    } while (w < 0 && errno == EINTR);
    close(fd);
}

static int serve(int port_fd, int port_base) {
    struct ibv_context *ctx = NULL;
    struct rpma_peer *peer = NULL;
    struct rpma_ep *ep = NULL;
    struct rpma_mr_local *mr = NULL;
    struct rpma_peer_cfg *pcfg = NULL;
    struct rpma_conn_req *req = NULL;
    struct rpma_conn *conn = NULL;
    enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    char port[16];
    int ret;

    who = "server";
    /* report before telling the parent, so that our message comes out before its own */
    if ((ret = rpma_utils_get_ibv_context(ADDR, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx)) ||
        (ret = rpma_peer_new(ctx, &peer))) {
        failed(ctx ? "rpma_peer_new" : "rpma_utils_get_ibv_context", ret);
        report_port(port_fd, 0);
        return ret;
    }
    /* another test may hold a port: try a few, but only a provider error means "taken" */
    int p = port_base;
    for (int i = 0; i < PORT_TRIES; i++, p++) {
        snprintf(port, sizeof(port), "%d", p);
        ret = rpma_ep_listen(peer, ADDR, port, &ep);
        if (ret != RPMA_E_PROVIDER) break;
    }
    if (ret) {
        failed("rpma_ep_listen", ret);
        report_port(port_fd, 0);
        return ret;
    }
    report_port(port_fd, p);

    uint8_t *buf = alloc_region(REGION_SIZE);
    if (!buf) return failed("posix_memalign", RPMA_E_NOMEM);
    TRY(rpma_mr_reg(peer, buf, REGION_SIZE,
                    RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC |
                        RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT,
                    &mr));

    /* direct_write_to_pmem lets the client ask for PERSISTENT flushes */
    TRY(rpma_peer_cfg_new(&pcfg));
    TRY(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true));

    struct server_info info = {0};
    size_t mr_size = 0, pcfg_size = 0;
    TRY(rpma_mr_get_descriptor_size(mr, &mr_size));
    TRY(rpma_peer_cfg_get_descriptor_size(pcfg, &pcfg_size));
    if (mr_size + pcfg_size > sizeof(info.descriptors)) {
        fprintf(stderr, "rpma_demo [server]: descriptors too large (%zu + %zu)\n", mr_size,
                pcfg_size);
        return 1;
    }
    info.mr_desc_size = (uint8_t)mr_size;
    info.pcfg_desc_size = (uint8_t)pcfg_size;
    TRY(rpma_mr_get_descriptor(mr, info.descriptors));
    TRY(rpma_peer_cfg_get_descriptor(pcfg, info.descriptors + mr_size));
    struct rpma_conn_private_data pdata = {&info, (uint8_t)(2 + mr_size + pcfg_size)};

    TRY(rpma_ep_next_conn_req(ep, NULL, &req));
    TRY(rpma_conn_req_connect(&req, &pdata, &conn));
    TRY(rpma_conn_next_event(conn, &ev));
    if (ev != RPMA_CONN_ESTABLISHED) {
        fprintf(stderr, "rpma_demo [server]: expected ESTABLISHED, got %s\n",
                rpma_utils_conn_event_2str(ev));
        return 1;
    }
    /* the client does all the work; we only wait for its orderly goodbye */
    TRY(rpma_conn_next_event(conn, &ev));
    if (ev != RPMA_CONN_CLOSED) {
        fprintf(stderr, "rpma_demo [server]: expected CLOSED, got %s\n",
                rpma_utils_conn_event_2str(ev));
        return 1;
    }
    /* the client's last act was to write and persist the signature */
    uint8_t want[SIGNATURE_LEN];
    fill(want, sizeof(want), 0xC0FFEEu);
    if (memcmp(buf, want, sizeof(want)) != 0) {
        fprintf(stderr, "rpma_demo [server]: the client's final write is not in the region\n");
        return 1;
    }

    TRY(rpma_conn_disconnect(conn));
    TRY(rpma_conn_delete(&conn));
    TRY(rpma_peer_cfg_delete(&pcfg));
    TRY(rpma_mr_dereg(&mr));
    TRY(rpma_ep_shutdown(&ep));
    TRY(rpma_peer_delete(&peer));
    free(buf);
    return 0;
}

/* ---- initiator (parent) ---- */

struct client {
    struct rpma_conn *conn;
    struct rpma_cq *cq;
    struct rpma_mr_remote *dst;
    struct rpma_mr_local *src_mr;
    struct rpma_mr_local *read_mr;
    uint8_t *src;
    uint8_t *back;
};

/* waits for the completion tagged ctx; any other completion or error status is a failure */
static int wait_for(struct client *c, const void *ctx, enum ibv_wc_opcode opcode,
                    const char *what) {
    struct ibv_wc wc;
    for (;;) {
        int ret = rpma_cq_get_wc(c->cq, 1, &wc, NULL);
        if (ret == RPMA_E_NO_COMPLETION) {
            /* nothing yet: sleep on the channel, then drain again (a wake-up may race) */
            ret = rpma_cq_wait(c->cq);
            if (ret && ret != RPMA_E_NO_COMPLETION) return failed("rpma_cq_wait", ret);
            continue;
        }
        if (ret) return failed("rpma_cq_get_wc", ret);
        break;
    }
    if (wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "rpma_demo [client]: %s completed with status %d\n", what, (int)wc.status);
        return 1;
    }
    if (wc.wr_id != (uint64_t)(uintptr_t)ctx || wc.opcode != opcode) {
        fprintf(stderr, "rpma_demo [client]: %s: unexpected completion (wr_id %llu, opcode %d)\n",
                what, (unsigned long long)wc.wr_id, (int)wc.opcode);
        return 1;
    }
    return 0;
}

static int write_flush(struct client *c, size_t len, enum rpma_flush_type type) {
    static const int wctx = 1, fctx = 2;
    TRY(rpma_write(c->conn, c->dst, 0, c->src_mr, 0, len, RPMA_F_COMPLETION_ON_ERROR, &wctx));
    TRY(rpma_flush(c->conn, c->dst, 0, len, type, RPMA_F_COMPLETION_ALWAYS, &fctx));
    /* a flush completes only after the write before it: one completion covers both */
    return wait_for(c, &fctx, IBV_WC_RDMA_READ, "flush");
}

static int read_back(struct client *c, size_t len) {
    static const int rctx = 3;
    TRY(rpma_read(c->conn, c->read_mr, 0, c->dst, 0, len, RPMA_F_COMPLETION_ALWAYS, &rctx));
    return wait_for(c, &rctx, IBV_WC_RDMA_READ, "read");
}

/* average write+flush and read latency for one size; every read is checked */
static int measure_latency(struct client *c, size_t len, int iters, double *wf_us, double *rd_us) {
    double wf = 0, rd = 0;
    for (int i = 0; i < iters; i++) {
        fill(c->src, len, (unsigned)i);
        memset(c->back, 0, len);
        double t0 = now_us();
        int ret = write_flush(c, len, RPMA_FLUSH_TYPE_PERSISTENT);
        double t1 = now_us();
        if (ret) return ret;
        if ((ret = read_back(c, len))) return ret;
        double t2 = now_us();
        if (memcmp(c->src, c->back, len) != 0) {
            fprintf(stderr, "rpma_demo [client]: %zu B read back differ at iteration %d\n", len, i);
            return 1;
        }
        wf += t1 - t0;
        rd += t2 - t1;
    }
    *wf_us = wf / iters;
    *rd_us = rd / iters;
    return 0;
}

/* 64 KiB writes in batches; only the last write of a batch asks for a completion */
static int measure_bandwidth(struct client *c, double *mib_s) {
    static const int bctx = 4;
    const unsigned blocks = BW_TOTAL / BW_BLOCK, slots = REGION_SIZE / BW_BLOCK;
    fill(c->src, REGION_SIZE, 77u);
    double t0 = now_us();
    for (unsigned b = 0; b < blocks; b++) {
        size_t off = (size_t)(b % slots) * BW_BLOCK;
        int last = (b % BW_BATCH == BW_BATCH - 1) || b == blocks - 1;
        int flags = last ? RPMA_F_COMPLETION_ALWAYS : RPMA_F_COMPLETION_ON_ERROR;
        TRY(rpma_write(c->conn, c->dst, off, c->src_mr, off, BW_BLOCK, flags, &bctx));
        if (last) {
            int ret = wait_for(c, &bctx, IBV_WC_RDMA_WRITE, "64 KiB write");
            if (ret) return ret;
        }
    }
    double t1 = now_us();
    *mib_s = ((double)BW_TOTAL / (1 << 20)) / ((t1 - t0) / 1e6);
    /* the whole region now holds the pattern: read it back once to prove it */
    TRY(rpma_flush(c->conn, c->dst, 0, REGION_SIZE, RPMA_FLUSH_TYPE_VISIBILITY,
                   RPMA_F_COMPLETION_ALWAYS, &bctx));
    int ret = wait_for(c, &bctx, IBV_WC_RDMA_READ, "flush (visibility)");
    if (ret || (ret = read_back(c, REGION_SIZE))) return ret;
    if (memcmp(c->src, c->back, REGION_SIZE) != 0) {
        fprintf(stderr, "rpma_demo [client]: region differs after the bandwidth run\n");
        return 1;
    }
    return 0;
}

static int run_client(const char *port, int iters) {
    struct ibv_context *ctx = NULL;
    struct rpma_peer *peer = NULL;
    struct rpma_conn_cfg *cfg = NULL;
    struct rpma_conn_req *req = NULL;
    struct rpma_peer_cfg *remote_pcfg = NULL;
    struct client c = {0};
    enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;

    TRY(rpma_utils_get_ibv_context(ADDR, RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx));
    TRY(rpma_peer_new(ctx, &peer));

    c.src = alloc_region(REGION_SIZE);
    c.back = alloc_region(REGION_SIZE);
    if (!c.src || !c.back) return failed("posix_memalign", RPMA_E_NOMEM);
    TRY(rpma_mr_reg(peer, c.src, REGION_SIZE, RPMA_MR_USAGE_WRITE_SRC, &c.src_mr));
    TRY(rpma_mr_reg(peer, c.back, REGION_SIZE, RPMA_MR_USAGE_READ_DST, &c.read_mr));

    /* room for a whole batch of unsignalled writes plus the write+flush pairs */
    TRY(rpma_conn_cfg_new(&cfg));
    TRY(rpma_conn_cfg_set_sq_size(cfg, 2 * BW_BATCH));
    TRY(rpma_conn_cfg_set_cq_size(cfg, 2 * BW_BATCH));
    TRY(rpma_conn_req_new(peer, ADDR, port, cfg, &req));
    TRY(rpma_conn_req_connect(&req, NULL, &c.conn));
    TRY(rpma_conn_next_event(c.conn, &ev));
    if (ev != RPMA_CONN_ESTABLISHED) {
        fprintf(stderr, "rpma_demo [client]: expected ESTABLISHED, got %s\n",
                rpma_utils_conn_event_2str(ev));
        return 1;
    }

    struct rpma_conn_private_data pdata = {0};
    TRY(rpma_conn_get_private_data(c.conn, &pdata));
    const struct server_info *info = pdata.ptr;
    if (!info || pdata.len < 2 || pdata.len < 2u + info->mr_desc_size + info->pcfg_desc_size) {
        fprintf(stderr, "rpma_demo [client]: malformed private data (%u bytes)\n",
                (unsigned)pdata.len);
        return 1;
    }
    TRY(rpma_mr_remote_from_descriptor(info->descriptors, info->mr_desc_size, &c.dst));
    TRY(rpma_peer_cfg_from_descriptor(info->descriptors + info->mr_desc_size, info->pcfg_desc_size,
                                      &remote_pcfg));
    TRY(rpma_conn_apply_remote_peer_cfg(c.conn, remote_pcfg));
    TRY(rpma_peer_cfg_delete(&remote_pcfg));

    size_t remote_size = 0;
    int flush_type = 0;
    TRY(rpma_mr_remote_get_size(c.dst, &remote_size));
    TRY(rpma_mr_remote_get_flush_type(c.dst, &flush_type));
    if (remote_size < REGION_SIZE || !(flush_type & RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT)) {
        fprintf(stderr, "rpma_demo [client]: remote region too small or not persistent\n");
        return 1;
    }
    TRY(rpma_conn_get_cq(c.conn, &c.cq));

    static const size_t sizes[] = {64, 4096};
    double wf[2] = {0}, rd[2] = {0}, bw = 0;
    for (int i = 0; i < 2; i++) {
        int ret = measure_latency(&c, sizes[i], iters, &wf[i], &rd[i]);
        if (ret) return ret;
    }
    int ret = measure_bandwidth(&c, &bw);
    if (ret) return ret;

    /* the signature the server checks after we leave */
    fill(c.src, SIGNATURE_LEN, 0xC0FFEEu);
    if ((ret = write_flush(&c, SIGNATURE_LEN, RPMA_FLUSH_TYPE_PERSISTENT))) return ret;

    printf("rpma loopback demo: %s:%s, %d iterations per size, data verified\n", ADDR, port, iters);
    printf("  %-27s %8s %16s\n", "operation", "size", "average");
    for (int i = 0; i < 2; i++) {
        printf("  %-27s %4zu %-3s %13.2f us\n", "write + flush(PERSISTENT)", sizes[i], "B", wf[i]);
        printf("  %-27s %4zu %-3s %13.2f us\n", "read", sizes[i], "B", rd[i]);
    }
    printf("  %-27s %4u %-3s %10.1f MiB/s\n", "write bandwidth", BW_BLOCK >> 10, "KiB", bw);

    /* orderly teardown: disconnect, wait for CLOSED, then delete */
    TRY(rpma_conn_disconnect(c.conn));
    TRY(rpma_conn_next_event(c.conn, &ev));
    if (ev != RPMA_CONN_CLOSED) {
        fprintf(stderr, "rpma_demo [client]: expected CLOSED, got %s\n",
                rpma_utils_conn_event_2str(ev));
        return 1;
    }
    TRY(rpma_conn_delete(&c.conn));
    TRY(rpma_mr_remote_delete(&c.dst));
    TRY(rpma_mr_dereg(&c.src_mr));
    TRY(rpma_mr_dereg(&c.read_mr));
    TRY(rpma_conn_cfg_delete(&cfg));
    TRY(rpma_peer_delete(&peer));
    free(c.src);
    free(c.back);
    return 0;
}

/* waits for the server; after a client failure it may wait for us forever, so after a grace
 * second (to let it report its own error) it is terminated */
static int reap(pid_t pid, int *status, int client_failed) {
    for (int i = 0; client_failed && i < 100; i++) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) return 0;
        if (r < 0 && errno != EINTR) return -1;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (client_failed) kill(pid, SIGTERM);
    pid_t r;
    do {
        r = waitpid(pid, status, 0);
    } while (r < 0 && errno == EINTR);
    return r == pid ? 0 : -1;
}

int main(int argc, char *argv[]) {
    int iters = 1000;
    if (argc > 1) {
        char *end = NULL;
        long v = strtol(argv[1], &end, 10);
        if (argc > 2 || !end || *end || v < 1 || v > 10000000) {
            fprintf(stderr, "usage: %s [iterations]\n", argv[0]);
            return 2;
        }
        iters = (int)v;
    }

    int fds[2];
    if (pipe(fds)) {
        perror("pipe");
        return 1;
    }
    /* a port per run keeps parallel runs apart; the server walks up from here if taken */
    int port_base = 20000 + (int)(getpid() % 20000);
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        close(fds[0]);
        /* if the client dies (e.g. a crash), nobody will close our connection: go with it */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1);
        alarm(DEADLINE_S);
        _exit(serve(fds[1], port_base) ? 1 : 0);
    }
    close(fds[1]);
    alarm(DEADLINE_S);

    int port = 0;
    ssize_t got;
    do {
        got = read(fds[0], &port, sizeof(port));
    } while (got < 0 && errno == EINTR);
    close(fds[0]);

    int ret = 1;
    if (got == (ssize_t)sizeof(port) && port > 0) {
        char port_str[16];
        snprintf(port_str, sizeof(port_str), "%d", port);
        ret = run_client(port_str, iters);
    } else {
        fprintf(stderr, "rpma_demo [client]: the server could not start listening\n");
    }
    int status = 0;
    if (reap(pid, &status, ret != 0)) {
        perror("waitpid");
        return 1;
    }
    int server_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!server_ok) {
        if (WIFSIGNALED(status))
            fprintf(stderr, "rpma_demo: the server died of signal %d\n", WTERMSIG(status));
        else
            fprintf(stderr, "rpma_demo: the server exited with status %d\n", WEXITSTATUS(status));
        ret = 1;
    }
    if (ret) {
        fprintf(stderr, "rpma_demo: FAILED\n");
        return 1;
    }
    return 0;
}
