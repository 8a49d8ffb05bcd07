/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * perf.h -- rpma-perf: a benchmark and demo CLI built on the public librpma API only.
 *
 * A server exposes one region (readable, writable, flushable to persistence) and answers any
 * number of clients; a client drives one operation type over N connections (one thread each)
 * and reports bandwidth, IOPS, per-op latency percentiles and CPU time on both sides.
 */
#ifndef RPMA_PERF_H
#define RPMA_PERF_H

#include <librpma.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "why.h"

#define PERF_DEFAULT_REGION (64u << 20)
#define PERF_MAX_IODEPTH 1024
#define PERF_MAX_CONNS 64
/* stall watchdog: no completion for this long ends the client */
#define PERF_STALL_S 30
/* bound of one connection event wait */
#define PERF_EVENT_MS 15000

enum perf_op {
    OP_READ,
    OP_WRITE,
    OP_WRITE_FLUSH,
    OP_WRITE_FLUSH_PERSISTENT,
    OP_ATOMIC_WRITE,
    OP_SEND,
    OP_WRITE_IMM,
    OP_GPSPM,     /* write, then a flush request by send; the server's thread answers by send */
    OP_SEND_RECV, /* send, the server's thread answers with the same bytes: a round trip */
    OP__COUNT
};

/* the server's application thread handles each message and answers it (GPSPM-style) */
static inline bool perf_op_answered(enum perf_op op) {
    return op == OP_GPSPM || op == OP_SEND_RECV;
}

const char *perf_op_name(enum perf_op op);
int perf_op_parse(const char *s, enum perf_op *op);

/* ---- wire format of this tool (little-endian, fixed sizes) ---- */

/* client -> server in connect private data */
#define PERF_HELLO_MAGIC 0x31465052u /* "RPF1" */
struct perf_hello {
    uint32_t magic;
    uint32_t op;
    uint32_t msg_size; /* bytes per send, for the server's receive buffers */
    uint32_t depth;    /* sends the client may have in flight */
    uint32_t flags;    /* PERF_HELLO_*; absent (0) from clients before it was added */
};
/* the server's thread busy-polls rpma_cq_get_wc instead of waiting in rpma_cq_wait */
#define PERF_HELLO_SERVER_POLL 0x1u

/* gpspm: the flush request (client -> server) and its answer (server -> client) */
struct perf_flush_req {
    uint64_t offset; /* in the server's region */
    uint32_t length;
    uint32_t slot; /* echoed in the answer */
};
struct perf_flush_resp {
    uint32_t slot;
    uint32_t status; /* 0: persisted */
};
#define PERF_ANSWER_SLOT 64 /* client bytes per gpspm request and per answer */

/* server -> client in accept private data: two sizes, then the descriptors */
struct perf_welcome {
    uint8_t mr_desc_size;
    uint8_t pcfg_desc_size;
    uint8_t desc[62];
};

/* control messages: 0-byte sends with these immediates (host order; sent in network order) */
#define PERF_CTL_START 0x53544152u
#define PERF_CTL_STOP 0x53544f50u

/* server -> client answer to STOP: the server's side of the session */
#define PERF_STATS_MAGIC 0x53465052u
struct perf_stats {
    uint32_t magic;
    uint32_t reserved;
    uint64_t cpu_user_ns; /* server process CPU between START and STOP */
    uint64_t cpu_sys_ns;
    uint64_t wall_ns;
    uint64_t data_msgs; /* sends and writes-with-imm received in the session */
    uint64_t data_bytes;
};

/* ---- data pattern: 8-byte words that depend only on the offset in the server region ---- */
uint64_t perf_pattern_word(uint64_t offset);
void perf_pattern_fill(void *buf, size_t len, uint64_t offset); /* offset 8-aligned */
/* first bad byte index or -1 */
long perf_pattern_check(const void *buf, size_t len, uint64_t offset);

/* ---- latency histogram (log-linear, < 1.6 % error) ---- */
#define HIST_SUB 64
#define HIST_BUCKETS (HIST_SUB * 60)
struct hist {
    uint64_t count;
    uint64_t sum_ns;
    uint64_t max_ns;
    uint64_t min_ns;
    uint64_t b[HIST_BUCKETS];
};
void hist_init(struct hist *h);
void hist_add(struct hist *h, uint64_t ns);
void hist_merge(struct hist *dst, const struct hist *src);
uint64_t hist_pct(const struct hist *h, double p); /* p in [0, 100] */

/* ---- server ---- */
struct server_opts {
    const char *addr;
    const char *port;
    size_t size;
    const char *pmem; /* file to map, or NULL for anonymous memory */
    bool verbose;
    int ready_fd;   /* >= 0: write the port number (int) here once listening; 0 on failure */
    int port_tries; /* ports to try upward from port (loopback) */
};
int perf_server(const struct server_opts *o);

/* ---- client ---- */
struct client_opts {
    const char *addr;
    const char *port;
    enum perf_op op;
    size_t size;
    int iodepth;
    int conns;
    double time_s;  /* > 0: run this long */
    uint64_t count; /* > 0: ops per connection */
    bool busy_poll;
    bool server_poll; /* gpspm, send-recv: the server's thread busy-polls (default: busy_poll) */
    bool progress;    /* live progress line on stderr */
};

struct client_result {
    uint64_t ops;
    uint64_t bytes;
    double seconds;
    double seconds_monotonic; /* the same span by CLOCK_MONOTONIC, whatever --clock says */
    struct hist lat;
    double client_cpu_s;
    double server_cpu_s;
    bool server_cpu_known;
    bool verified;
    uint64_t verified_bytes;
    char verify_note[96];
};

/* 0 on success; prints its own errors */
int perf_client(const struct client_opts *o, struct client_result *r);

/* ---- soak: mixed operations, every byte read checked against what was written ---- */
struct soak_opts {
    const char *addr;
    const char *port;
    int conns;
    int iodepth;
    size_t max_size; /* largest operation */
    uint64_t window; /* bytes of the server region each connection owns (at most) */
    double time_s;
    double interval_s; /* status line period */
    uint64_t seed;
};

/* 0 when every check passed; prints a status line every interval and the verdict */
int perf_soak(const struct soak_opts *o);

/* the connection's next event within timeout_ms; UNDEFINED on timeout, LOST on failure */
enum rpma_conn_event perf_wait_event(struct rpma_conn *conn, int timeout_ms);
/* connects with hello, waits for ESTABLISHED, takes the CQ and the server's region and peer cfg
 * from the welcome; messages name `who` and connection `idx`; 0 or non-zero after printing why */
int perf_connect(struct rpma_peer *peer, const char *addr, const char *port,
                 const struct rpma_conn_cfg *cfg, const struct perf_hello *hello, const char *who,
                 int idx, struct rpma_conn **conn, struct rpma_cq **cq,
                 struct rpma_mr_remote **rmr);

/* ---- errors: one plain line with the cause librpma logged (why.h) ---- */

/* runs a librpma call, keeping the cause it logs for perf_err; the call's return value */
#define PERF_CALL(call) (why_begin(), perf_called(call))
int perf_called(int ret);
/* prints "rpma-perf WHO: [connection IDX: ]CAUSE", CAUSE being what librpma logged in this
 * thread's last failed PERF_CALL, or else "WHAT: " and rpma_err_2str(ret); idx < 0 for none;
 * returns ret, or -1 for 0 */
int perf_err(const char *who, int idx, const char *what, int ret);
/* a peer on the device for addr (a local address for a server); NULL after printing why */
struct rpma_peer *perf_peer_new(const char *who, const char *addr, bool server);

/* CLOCK_MONOTONIC, or the time stamp counter on its time line (perf_clock_init) */
uint64_t perf_now_ns(void);
/* which: "auto" (the TSC where the kernel calls it invariant), "tsc" or "monotonic" (the
 * command line checked the name); before any thread starts. -1, with a line on stderr, if the
 * counter was asked for and cannot be had. */
int perf_clock_init(const char *which);
uint64_t perf_monotonic_ns(void);  /* CLOCK_MONOTONIC, whatever --clock says */
const char *perf_clock_name(void); /* "tsc" or "monotonic" */
/* process CPU (user, sys) in ns */
void perf_cpu_ns(uint64_t *user, uint64_t *sys);

#endif /* RPMA_PERF_H */
