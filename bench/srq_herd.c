/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * srq_herd.c -- what an SRQ post costs when many connections wait on it (docs/rc-rebuild.md,
 * open question 4): a forked server shares one SRQ between N connections; the client sends one
 * message on each while the SRQ holds no receive, so every connection's responder waits for one
 * (RNR). Then the server posts the N receives, one at a time, each followed by rpma_cq_wait and
 * rpma_cq_get_wc for its completion ("one"), or all at once before taking the N completions
 * ("batch"). --gap-us pauses after each completion ("one") or post ("batch"), as a server
 * that does work between receives does. It reports the time and the server's CPU time for the N,
 * and its wake-ups (voluntary switches). Prints one JSON object.
 *
 *   srq_herd [--connections N] [--mode one|batch] [--gap-us U] [--settle S] [--port P]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <librpma.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_rpma.h"

#define MSG 8

static void write_u64(int fd, uint64_t v) {
    if (write(fd, &v, sizeof(v)) != (ssize_t)sizeof(v)) exit(1);
}

static uint64_t read_u64(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    uint64_t v = 0;
    if (poll(&p, 1, 600000) <= 0 || read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v)) {
        fprintf(stderr, "srq_herd [%s]: the other side went away\n", bench_role);
        exit(1);
    }
    return v;
}

static uint64_t wakeups(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_nvcsw;
}

/* one completion from the SRQ's RCQ: IBV_WC_SUCCESS and IBV_WC_RECV, or the run fails */
static void take_wc(struct rpma_cq *cq) {
    for (;;) {
        struct ibv_wc wc;
        int n = 0, ret = rpma_cq_get_wc(cq, 1, &wc, &n);
        if (ret == 0 && n == 1) {
            if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) {
                fprintf(stderr, "srq_herd [server]: completion status %d opcode %d\n",
                        (int)wc.status, (int)wc.opcode);
                exit(1);
            }
            return;
        }
        if (ret != RPMA_E_NO_COMPLETION) bench_fail("rpma_cq_get_wc", ret);
        TRY(rpma_cq_wait(cq));
    }
}

static void server(int n, int port, int batch, double gap_s, double settle, int up, int down) {
    bench_role = "server";
    struct ibv_context *dev = NULL;
    struct rpma_peer *peer = NULL;
    TRY(rpma_utils_get_ibv_context(BENCH_ADDR, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev));
    TRY(rpma_peer_new(dev, &peer));
    struct rpma_srq_cfg *scfg = NULL;
    TRY(rpma_srq_cfg_new(&scfg));
    TRY(rpma_srq_cfg_set_rq_size(scfg, (uint32_t)n));
    TRY(rpma_srq_cfg_set_rcq_size(scfg, (uint32_t)n));
    struct rpma_srq *srq = NULL;
    TRY(rpma_srq_new(peer, scfg, &srq));
    struct rpma_cq *rcq = NULL;
    TRY(rpma_srq_get_rcq(srq, &rcq));
    struct rpma_conn_cfg *cfg = NULL;
    TRY(rpma_conn_cfg_new(&cfg));
    TRY(rpma_conn_cfg_set_srq(cfg, srq));
    char *buf = calloc((size_t)n, MSG);
    struct rpma_mr_local *mr = NULL;
    if (!buf) exit(1);
    TRY(rpma_mr_reg(peer, buf, (size_t)n * MSG, RPMA_MR_USAGE_RECV, &mr));

    struct rpma_ep *ep = NULL;
    write_u64(up, (uint64_t)bench_listen(peer, port, &ep));
    struct rpma_conn **conns = calloc((size_t)n, sizeof(*conns));
    if (!conns) exit(1);
    for (int i = 0; i < n; i++) {
        struct rpma_conn_req *req = NULL;
        TRY(rpma_ep_next_conn_req(ep, cfg, &req));
        TRY(rpma_conn_req_connect(&req, NULL, &conns[i]));
        bench_expect_event(conns[i], RPMA_CONN_ESTABLISHED, i);
    }
    write_u64(up, (uint64_t)n);
    read_u64(down);        /* every message is sent */
    bench_sleep_s(settle); /* and has reached its responder, which waits for a receive */

    uint64_t t0 = bench_now_ns(), c0 = bench_cpu_ns(), w0 = wakeups();
    for (int i = 0; i < n; i++) {
        TRY(rpma_srq_recv(srq, mr, (size_t)i * MSG, MSG, NULL));
        if (!batch) take_wc(rcq);
        if (gap_s > 0) bench_sleep_s(gap_s);
    }
    if (batch)
        for (int i = 0; i < n; i++) take_wc(rcq);
    write_u64(up, bench_now_ns() - t0);
    write_u64(up, bench_cpu_ns() - c0);
    write_u64(up, wakeups() - w0);

    read_u64(down); /* the client has disconnected */
    for (int i = 0; i < n; i++) {
        bench_expect_event(conns[i], RPMA_CONN_CLOSED, i);
        TRY(rpma_conn_disconnect(conns[i]));
        TRY(rpma_conn_delete(&conns[i]));
    }
    TRY(rpma_ep_shutdown(&ep));
    TRY(rpma_mr_dereg(&mr));
    TRY(rpma_conn_cfg_delete(&cfg));
    TRY(rpma_srq_delete(&srq));
    TRY(rpma_srq_cfg_delete(&scfg));
    TRY(rpma_peer_delete(&peer));
    free(conns);
    free(buf);
    write_u64(up, 0);
    _exit(0);
}

int main(int argc, char *argv[]) {
    bench_prog = "srq_herd";
    int n = 1000, port = 47950, batch = 0;
    double settle = 1.0, gap_us = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--connections"))
            n = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--port"))
            port = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--gap-us"))
            gap_us = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--settle"))
            settle = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--mode") && !strcmp(argv[i + 1], "one"))
            batch = 0, i++;
        else if (i + 1 < argc && !strcmp(argv[i], "--mode") && !strcmp(argv[i + 1], "batch"))
            batch = 1, i++;
        else {
            fprintf(stderr,
                    "usage: srq_herd [--connections N] [--mode one|batch] [--gap-us U] "
                    "[--settle S] [--port P]\n");
            return 2;
        }
    }
    if (n < 1 || port <= 0 || port > 65535 || settle < 0 || gap_us < 0) {
        fprintf(stderr, "srq_herd: bad --connections, --port, --gap-us or --settle\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    alarm(300 + (unsigned)n / 10);

    int up[2], down[2];
    pid_t pid = bench_fork_server(up, down);
    if (pid < 0) return 1;
    if (pid == 0) server(n, port, batch, gap_us / 1e6, settle, up[1], down[0]);
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", (int)read_u64(up[0]));

    struct ibv_context *dev = NULL;
    struct rpma_peer *peer = NULL;
    TRY(rpma_utils_get_ibv_context(BENCH_ADDR, RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev));
    TRY(rpma_peer_new(dev, &peer));
    static char msg[MSG] = "herd";
    struct rpma_mr_local *mr = NULL;
    TRY(rpma_mr_reg(peer, msg, MSG, RPMA_MR_USAGE_SEND, &mr));
    struct rpma_conn_cfg *cfg = NULL;
    TRY(rpma_conn_cfg_new(&cfg));
    TRY(rpma_conn_cfg_set_sq_size(cfg, 1));
    TRY(rpma_conn_cfg_set_cq_size(cfg, 1));
    TRY(rpma_conn_cfg_set_rq_size(cfg, 1));
    struct rpma_conn **conns = calloc((size_t)n, sizeof(*conns));
    if (!conns) return 1;
    for (int i = 0; i < n; i++) {
        struct rpma_conn_req *req = NULL;
        TRY(rpma_conn_req_new(peer, BENCH_ADDR, ps, cfg, &req));
        TRY(rpma_conn_req_connect(&req, NULL, &conns[i]));
        bench_expect_event(conns[i], RPMA_CONN_ESTABLISHED, i);
    }
    if (read_u64(up[0]) != (uint64_t)n) return 1;
    for (int i = 0; i < n; i++)
        TRY(rpma_send(conns[i], mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, NULL));
    write_u64(down[1], 1);
    uint64_t serve_ns = read_u64(up[0]), cpu_ns = read_u64(up[0]), wake = read_u64(up[0]);
    for (int i = 0; i < n; i++) {
        struct rpma_cq *cq = NULL;
        TRY(rpma_conn_get_cq(conns[i], &cq));
        for (;;) {
            struct ibv_wc wc;
            int got = 0, ret = rpma_cq_get_wc(cq, 1, &wc, &got);
            if (ret == 0 && got == 1) {
                if (wc.status != IBV_WC_SUCCESS) {
                    fprintf(stderr, "srq_herd: send %d completed with status %d\n", i,
                            (int)wc.status);
                    return 1;
                }
                break;
            }
            if (ret != RPMA_E_NO_COMPLETION) bench_fail("rpma_cq_get_wc", ret);
            TRY(rpma_cq_wait(cq));
        }
        TRY(rpma_conn_disconnect(conns[i]));
        bench_expect_event(conns[i], RPMA_CONN_CLOSED, i);
        TRY(rpma_conn_delete(&conns[i]));
    }
    write_u64(down[1], 1);
    int st = 0;
    uint64_t done = read_u64(up[0]);
    waitpid(pid, &st, 0);
    TRY(rpma_mr_dereg(&mr));
    TRY(rpma_conn_cfg_delete(&cfg));
    TRY(rpma_peer_delete(&peer));
    free(conns);
    if (done != 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "srq_herd: the server did not close cleanly\n");
        return 1;
    }
    printf(
        "{\"peer\":\"srq_herd\",\"connections\":%d,\"mode\":\"%s\",\"serve_s\":%.4f,"
        "\"server_cpu_s\":%.4f,\"us_per_recv\":%.2f,\"server_wakeups\":%llu,\"gap_us\":%.0f}\n",
        n, batch ? "batch" : "one", (double)serve_ns / 1e9, (double)cpu_ns / 1e9,
        (double)serve_ns / 1e3 / n, (unsigned long long)wake, gap_us);
    return 0;
}
