/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lat_probe.c -- the smallest librpma latency loop: what the library costs, without rpma-perf.
 *
 * usage: lat_probe server ADDR PORT
 *        lat_probe client ADDR PORT read|send-recv N
 *
 * The client runs N round trips, one at a time, busy-polling rpma_cq_get_wc: an 8-byte
 * rpma_read of the server's region, or an 8-byte rpma_send that the server answers with an
 * rpma_send (its next receive posted first). Each round trip is stamped once, as perftest does
 * (x86: the time stamp counter, on CLOCK_MONOTONIC's scale measured over the run; elsewhere
 * CLOCK_MONOTONIC), and it prints the p50, p99 and mean in microseconds on one line. The same
 * binary runs on upstream librpma (LD_LIBRARY_PATH naming its directory), so the two libraries
 * meet on one program: bench/verbs_probe.sh does that beside perftest in the soft-RoCE guest.
 * The server says "listening" once a client may connect, serves one client, then exits.
 */
#include <librpma.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define MSG 8
#define QUIT 'q'

static uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

/* the per-round-trip stamp: the time stamp counter where there is one */
static uint64_t stamp(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#else
    return mono_ns();
#endif
}

static void check(int ret, const char *what) {
    if (ret) {
        fprintf(stderr, "lat_probe: %s: %s\n", what, rpma_err_2str(ret));
        exit(1);
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* spins until a receive completes (recv) or the request with context ctx does; other
 * completions pass by, but none may fail */
static void wait_for(struct rpma_cq *cq, bool recv, uint64_t ctx) {
    for (;;) {
        struct ibv_wc wc;
        int got = 0, ret;
        while ((ret = rpma_cq_get_wc(cq, 1, &wc, &got)) == RPMA_E_NO_COMPLETION)
            ;
        check(ret, "rpma_cq_get_wc");
        if (wc.status != IBV_WC_SUCCESS) {
            fprintf(stderr, "lat_probe: completion status %d\n", (int)wc.status);
            exit(1);
        }
        if (recv ? wc.opcode == IBV_WC_RECV : wc.wr_id == ctx) return;
    }
}

int main(int argc, char *argv[]) {
    bool server = argc == 4 && strcmp(argv[1], "server") == 0;
    bool client = argc == 6 && strcmp(argv[1], "client") == 0;
    bool sendrecv = client && strcmp(argv[4], "send-recv") == 0;
    long n = client ? atol(argv[5]) : 0;
    if (!(server || (client && (sendrecv || strcmp(argv[4], "read") == 0) && n > 0))) {
        fprintf(stderr,
                "usage: lat_probe server ADDR PORT\n"
                "       lat_probe client ADDR PORT read|send-recv N\n");
        return 2;
    }
    const char *addr = argv[2], *port = argv[3];
    struct ibv_context *dev = NULL;
    struct rpma_peer *peer = NULL;
    check(rpma_utils_get_ibv_context(
              addr, server ? RPMA_UTIL_IBV_CONTEXT_LOCAL : RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev),
          "rpma_utils_get_ibv_context");
    check(rpma_peer_new(dev, &peer), "rpma_peer_new");
    /* [0, 8): receives, [8, 16): sends, [16, 24): the read source or destination */
    char *buf = aligned_alloc(4096, 4096);
    if (!buf) return 1;
    memset(buf, 0, 4096);
    struct rpma_mr_local *mr = NULL;
    int usage = RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV |
                (server ? RPMA_MR_USAGE_READ_SRC : RPMA_MR_USAGE_READ_DST);
    check(rpma_mr_reg(peer, buf, 4096, usage, &mr), "rpma_mr_reg");
    struct rpma_conn_cfg *cfg = NULL;
    check(rpma_conn_cfg_new(&cfg), "rpma_conn_cfg_new");
    check(rpma_conn_cfg_set_sq_size(cfg, 64), "rpma_conn_cfg_set_sq_size");
    check(rpma_conn_cfg_set_rq_size(cfg, 8), "rpma_conn_cfg_set_rq_size");
    check(rpma_conn_cfg_set_cq_size(cfg, 80), "rpma_conn_cfg_set_cq_size");
    struct rpma_conn_req *req = NULL;
    struct rpma_conn *conn = NULL;
    struct rpma_ep *ep = NULL;
    enum rpma_conn_event ev;
    if (server) {
        char desc[64];
        size_t dsize = 0;
        check(rpma_mr_get_descriptor_size(mr, &dsize), "rpma_mr_get_descriptor_size");
        check(rpma_mr_get_descriptor(mr, desc), "rpma_mr_get_descriptor");
        struct rpma_conn_private_data pd = {desc, (uint8_t)dsize};
        check(rpma_ep_listen(peer, addr, port, &ep), "rpma_ep_listen");
        printf("listening\n"); /* a client may connect from now on */
        fflush(stdout);
        check(rpma_ep_next_conn_req(ep, cfg, &req), "rpma_ep_next_conn_req");
        check(rpma_conn_req_recv(req, mr, 0, MSG, NULL), "rpma_conn_req_recv");
        check(rpma_conn_req_connect(&req, &pd, &conn), "rpma_conn_req_connect");
    } else {
        check(rpma_conn_req_new(peer, addr, port, cfg, &req), "rpma_conn_req_new");
        check(rpma_conn_req_recv(req, mr, 0, MSG, NULL), "rpma_conn_req_recv");
        check(rpma_conn_req_connect(&req, NULL, &conn), "rpma_conn_req_connect");
    }
    check(rpma_conn_next_event(conn, &ev), "rpma_conn_next_event");
    if (ev != RPMA_CONN_ESTABLISHED) {
        fprintf(stderr, "lat_probe: %s\n", rpma_utils_conn_event_2str(ev));
        return 1;
    }
    struct rpma_cq *cq = NULL;
    check(rpma_conn_get_cq(conn, &cq), "rpma_conn_get_cq");

    if (server) {
        /* echo until the client's last message; the read case sends only that one */
        for (long i = 0;; i++) {
            wait_for(cq, true, 0);
            if (buf[0] == QUIT) break;
            check(rpma_recv(conn, mr, 0, MSG, NULL), "rpma_recv");
            check(rpma_send(conn, mr, 8, MSG,
                            i % 16 == 0 ? RPMA_F_COMPLETION_ALWAYS : RPMA_F_COMPLETION_ON_ERROR,
                            NULL),
                  "rpma_send");
        }
        check(rpma_conn_next_event(conn, &ev), "rpma_conn_next_event");
        (void)rpma_conn_disconnect(conn);
        check(rpma_conn_delete(&conn), "rpma_conn_delete");
        check(rpma_ep_shutdown(&ep), "rpma_ep_shutdown");
    } else {
        struct rpma_conn_private_data pd;
        struct rpma_mr_remote *rmr = NULL;
        check(rpma_conn_get_private_data(conn, &pd), "rpma_conn_get_private_data");
        check(rpma_mr_remote_from_descriptor(pd.ptr, pd.len, &rmr),
              "rpma_mr_remote_from_descriptor");
        uint64_t *ts = malloc(sizeof(*ts) * (size_t)(n + 1));
        if (!ts) return 1;
        uint64_t m0 = mono_ns(), s0 = stamp();
        for (long i = 0; i < n; i++) {
            ts[i] = stamp();
            if (sendrecv) {
                check(rpma_send(conn, mr, 8, MSG,
                                i % 16 == 0 ? RPMA_F_COMPLETION_ALWAYS : RPMA_F_COMPLETION_ON_ERROR,
                                NULL),
                      "rpma_send");
                wait_for(cq, true, 0);
                check(rpma_recv(conn, mr, 0, MSG, NULL), "rpma_recv");
            } else {
                check(rpma_read(conn, mr, 16, rmr, 16, MSG, RPMA_F_COMPLETION_ALWAYS, NULL),
                      "rpma_read");
                wait_for(cq, false, 0);
            }
        }
        ts[n] = stamp();
        uint64_t m1 = mono_ns(), s1 = stamp();
        double ns_per = s1 > s0 ? (double)(m1 - m0) / (double)(s1 - s0) : 1.0;
        for (long i = 0; i < n; i++) ts[i] = ts[i + 1] - ts[i];
        qsort(ts, (size_t)n, sizeof(*ts), cmp_u64);
        printf("%s 8 B: p50 %.2f us  p99 %.2f us  mean %.2f us  (%ld round trips)\n",
               sendrecv ? "send-recv" : "read", (double)ts[n / 2] * ns_per / 1e3,
               (double)ts[n * 99 / 100] * ns_per / 1e3, (double)(m1 - m0) / 1e3 / (double)n, n);
        free(ts);
        buf[8] = QUIT;
        check(rpma_send(conn, mr, 8, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)1), "rpma_send");
        wait_for(cq, false, 1); /* the server has it: RC acknowledged it */
        check(rpma_conn_disconnect(conn), "rpma_conn_disconnect");
        check(rpma_conn_next_event(conn, &ev), "rpma_conn_next_event");
        check(rpma_conn_delete(&conn), "rpma_conn_delete");
        check(rpma_mr_remote_delete(&rmr), "rpma_mr_remote_delete");
    }
    check(rpma_conn_cfg_delete(&cfg), "rpma_conn_cfg_delete");
    check(rpma_mr_dereg(&mr), "rpma_mr_dereg");
    check(rpma_peer_delete(&peer), "rpma_peer_delete");
    free(buf);
    return 0;
}
