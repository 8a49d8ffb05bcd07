/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_rpma.h -- what the benchmarks that run both sides through librpma share (idle_conns,
 * srq_herd): a failure that names the program, its side and the call, TRY, the wait for a
 * connection event, and a listen on the first free port. Each program sets bench_prog, and
 * bench_role in its server.
 */
#ifndef RPMA_BENCH_RPMA_H
#define RPMA_BENCH_RPMA_H

#include <librpma.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"

#define BENCH_ADDR "127.0.0.1"
#define BENCH_EVENT_MS 15000
#define BENCH_PORT_TRIES 32

static const char *bench_prog = "bench", *bench_role = "client";

static inline void bench_fail(const char *call, int ret) {
    fprintf(stderr, "%s [%s]: %s: %s (%d)%s\n", bench_prog, bench_role, call, rpma_err_2str(ret),
            ret,
            ret == RPMA_E_PROVIDER ? "; RPMA_PROVIDER names a provider this librpma lacks?" : "");
    exit(1);
}

#define TRY(call)                          \
    do {                                   \
        int ret_ = (call);                 \
        if (ret_) bench_fail(#call, ret_); \
    } while (0)

/* the next event of conn, within BENCH_EVENT_MS, or the run fails */
static inline enum rpma_conn_event bench_next_event(struct rpma_conn *conn) {
    int fd = -1;
    TRY(rpma_conn_get_event_fd(conn, &fd));
    uint64_t deadline = bench_now_ns() + (uint64_t)BENCH_EVENT_MS * 1000000ULL;
    while (bench_now_ns() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) continue;
        enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
        int ret = rpma_conn_next_event(conn, &ev);
        if (ret == RPMA_E_NO_EVENT) continue;
        if (ret) bench_fail("rpma_conn_next_event", ret);
        return ev;
    }
    fprintf(stderr, "%s [%s]: no connection event in %d ms\n", bench_prog, bench_role,
            BENCH_EVENT_MS);
    exit(1);
}

/* the run fails unless connection i's next event is want */
static inline void bench_expect_event(struct rpma_conn *conn, enum rpma_conn_event want, int i) {
    enum rpma_conn_event ev = bench_next_event(conn);
    if (ev == want) return;
    fprintf(stderr, "%s [%s]: connection %d: %s, expected %s\n", bench_prog, bench_role, i,
            rpma_utils_conn_event_2str(ev), rpma_utils_conn_event_2str(want));
    exit(1);
}

/* listens on BENCH_ADDR at the first free port from port on; returns that port */
static inline int bench_listen(struct rpma_peer *peer, int port, struct rpma_ep **ep) {
    int ret = 0;
    for (int i = 0; i < BENCH_PORT_TRIES; i++, port++) {
        char ps[16];
        snprintf(ps, sizeof(ps), "%d", port);
        if ((ret = rpma_ep_listen(peer, BENCH_ADDR, ps, ep)) == 0) return port;
    }
    bench_fail("rpma_ep_listen", ret);
    return -1;
}

#endif /* RPMA_BENCH_RPMA_H */
