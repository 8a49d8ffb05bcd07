/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * common.h -- helpers shared by the integration test programs (two processes over loopback).
 *
 * Every helper either succeeds or prints where and why it failed and exits with status 1, so a
 * scenario reads as a straight list of steps. Every wait is bounded.
 */
#ifndef RPMA_IT_COMMON_H
#define RPMA_IT_COMMON_H

#include <librpma.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* RPMA_TEST_TIME_SCALE (default 1): the factor every bound below is multiplied by, for runs on a
 * slow machine such as the emulated soft-RoCE guest (tests/guest) */
int it_time_scale(void);
/* RPMA_TEST_ADDR (default 127.0.0.1): the address a program that picks its own uses */
const char *it_test_addr(void);
/* RPMA_TEST_REFERENCE=1: the program runs against the reference librpma (tests/guest), so where
 * rpma deliberately differs from it (docs/testing.md) the test expects the reference's answer */
bool it_reference(void);
/* the transport is an RDMA stack: the reference, or rpma's verbs provider (RPMA_PROVIDER=verbs),
 * so what the device and rdma-core decide (fork rules, atomic-write emulation, log causes of a
 * lost connection) is the NIC's, not the tcp provider's. RPMA_PROVIDER unset over an RDMA
 * device's address counts as tcp here: run the suite there with RPMA_PROVIDER=verbs */
bool it_nic(void);

/* a backstop for every program: no scenario may run longer */
#define IT_ALARM_S (55 * it_time_scale())
/* bound of one wait for a completion or a connection event */
#define IT_WAIT_MS (15000 * it_time_scale())

/*
 * private data bytes a side receives, as RDMA CM delivers them: what the other side sent, then
 * zeros (the server's request and connection; the client's connection after ESTABLISHED)
 */
#define IT_PDATA_CONNECT 56
#define IT_PDATA_ACCEPT 196

/* sizes of the descriptors exchanged in private data */
#define IT_MR_DESC_SIZE 21
#define IT_PCFG_DESC_SIZE 1

void it_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

#define IT_FAIL(...) it_fail(__FILE__, __LINE__, __VA_ARGS__)

/* the condition must hold */
#define CHECK(cond)                                      \
    do {                                                 \
        if (!(cond)) IT_FAIL("check failed: %s", #cond); \
    } while (0)

/* the call must return 0 */
#define CHECK_OK(call)                                                                            \
    do {                                                                                          \
        int it_ret_ = (call);                                                                     \
        if (it_ret_ != 0) IT_FAIL("%s returned %d (%s)", #call, it_ret_, rpma_err_2str(it_ret_)); \
    } while (0)

/* the call must return exactly the given error code */
#define CHECK_ERR(call, expected)                                            \
    do {                                                                     \
        int it_ret_ = (call);                                                \
        if (it_ret_ != (expected))                                           \
            IT_FAIL("%s returned %d (%s), expected %s (%d)", #call, it_ret_, \
                    rpma_err_2str(it_ret_), #expected, (int)(expected));     \
    } while (0)

#define CHECK_EQ(a, b)                                                                      \
    do {                                                                                    \
        long long it_a_ = (long long)(a), it_b_ = (long long)(b);                           \
        if (it_a_ != it_b_) IT_FAIL("%s == %s failed: %lld != %lld", #a, #b, it_a_, it_b_); \
    } while (0)

/* role and arguments of a two-process scenario: NAME server|client ADDR PORT [args] */
struct it_args {
    bool server;
    const char *addr;
    const char *port;
    int argc; /* remaining arguments */
    char **argv;
};

/* parses argv, arms the alarm backstop and makes stdout line-buffered */
void it_init(int argc, char *argv[], struct it_args *args);
/* the main of a two-role program: it_init, then server or client; returns 0 */
int it_main(int argc, char *argv[], void (*server)(const struct it_args *),
            void (*client)(const struct it_args *));

/* announces a listening server to the runner */
void it_ready(void);

/* a peer on the device of addr (LOCAL for a server, REMOTE for a client) */
struct rpma_peer *it_peer_new(const char *addr, bool server);

/* allocates page-aligned zeroed memory, in whole pages, or fails */
void *it_alloc(size_t size);

/* monotonic milliseconds */
long long it_now_ms(void);
/* monotonic microseconds */
long long it_now_us(void);

/* waits until fd is readable; returns false on timeout */
bool it_poll_fd(int fd, int timeout_ms);
/* the descriptors this process holds open now */
int it_open_fds(void);
/* makes fd non-blocking (O_NONBLOCK added to its status flags) */
void it_set_nonblock(int fd);

/* ---- connections ---- */

/* next connection event within IT_WAIT_MS */
enum rpma_conn_event it_next_event(struct rpma_conn *conn);
/* the next event must be the given one */
void it_expect_event(struct rpma_conn *conn, enum rpma_conn_event expected);
/* the first event of a connection this side accepted: ESTABLISHED. On a NIC it may be CLOSED
 * instead, when the client disconnected at once: the kernel's CM may handle the client's
 * disconnect request before its ready-to-use message (their work items run on any CPU), and
 * rdma_cm then reports DISCONNECTED alone (the reference does the same). That CLOSED is kept:
 * the next it_next_event of the connection returns it, and deleting the connection drops it
 * (rpma_conn_delete is wrapped in every program that links common.c), so it never reaches a
 * later connection that happens to get the same address. */
void it_expect_accepted(struct rpma_conn *conn);

/* next incoming connection request within IT_WAIT_MS */
struct rpma_conn_req *it_next_req(struct rpma_ep *ep, const struct rpma_conn_cfg *cfg);

/* accepts req with pdata (may be NULL) and waits for ESTABLISHED (it_expect_accepted) */
struct rpma_conn *it_accept(struct rpma_conn_req **req, const void *pdata, size_t pdata_len);

/* connects to addr:port with pdata (may be NULL) and waits for ESTABLISHED */
struct rpma_conn *it_connect(struct rpma_peer *peer, const char *addr, const char *port,
                             const struct rpma_conn_cfg *cfg, const void *pdata, size_t pdata_len);

/* the side that ends the connection: disconnect, wait CLOSED, delete */
void it_disconnect_active(struct rpma_conn **conn);
/* the other side: wait CLOSED, disconnect, delete; with lost_ok LOST is accepted too */
void it_disconnect_passive(struct rpma_conn **conn, bool lost_ok);

/* accepts req with pdata (may be NULL) and n receives of len bytes each into mr (the k-th at
 * offset k * len, wr_id wr_id0 + k): the first posted on the request, so that it is there for
 * the first message, the others on the connection once ESTABLISHED */
struct rpma_conn *it_accept_with_recvs(struct rpma_conn_req **req, struct rpma_mr_local *mr, int n,
                                       size_t len, uintptr_t wr_id0, const void *pdata,
                                       size_t pdata_len);

/* the remote region whose descriptor is at pdata offset off */
struct rpma_mr_remote *it_remote_mr(struct rpma_conn *conn, size_t off);
/* applies the peer cfg descriptor at pdata offset off to conn */
void it_apply_remote_pcfg(struct rpma_conn *conn, size_t off);

/* ---- one region: the server accepts with its descriptor, the client takes it from there ---- */

struct it_region_server {
    struct rpma_peer *peer;
    struct rpma_mr_local *mr;
    char desc[IT_MR_DESC_SIZE]; /* the region's descriptor: the private data it accepts with */
    struct rpma_ep *ep;
};
/* a peer on a->addr, buf (size bytes, the caller's) registered with usage, its descriptor, the
 * endpoint listening on a->port and READY announced */
void it_region_server_open(struct it_region_server *s, const struct it_args *a, void *buf,
                           size_t size, int usage);
/* the next request, accepted with the descriptor (it_accept) */
struct rpma_conn *it_region_server_accept(struct it_region_server *s);
/* the endpoint shut down, the region deregistered, the peer deleted; buf stays the caller's */
void it_region_server_close(struct it_region_server *s);

/* the client: connects to a->addr:a->port (it_connect; cfg and pdata may be NULL); *remote gets
 * the server's region, from the private data at offset 0, and *cq the connection's CQ */
struct rpma_conn *it_connect_region(struct rpma_peer *peer, const struct it_args *a,
                                    const struct rpma_conn_cfg *cfg, const void *pdata,
                                    size_t pdata_len, struct rpma_mr_remote **remote,
                                    struct rpma_cq **cq);
/* deletes the remote region, then ends the connection from this side (it_disconnect_active) */
void it_disconnect_region(struct rpma_conn **conn, struct rpma_mr_remote **remote);

/* ---- completions ---- */

/*
 * Takes one completion from cq, waiting up to timeout_ms for it (rpma_cq_wait after the fd is
 * readable, then rpma_cq_get_wc); returns false on timeout.
 */
bool it_cq_next(struct rpma_cq *cq, struct ibv_wc *wc, int timeout_ms);
/* one completion within IT_WAIT_MS or fail */
void it_cq_get(struct rpma_cq *cq, struct ibv_wc *wc);
/* one completion that must be a success with this opcode and wr_id */
void it_cq_expect(struct rpma_cq *cq, enum ibv_wc_opcode opcode, const void *op_context);
/* it_cq_expect, and the completion's byte_len must be byte_len */
void it_cq_expect_len(struct rpma_cq *cq, enum ibv_wc_opcode opcode, const void *op_context,
                      uint32_t byte_len);
/* one completion of wr_id with this status (what names it in a failure) */
void it_cq_expect_status(struct rpma_cq *cq, uintptr_t wr_id, enum ibv_wc_status status,
                         const char *what);
/*
 * n successful completions in any order, each matching a different (opcodes[k], ctxs[k]) pair;
 * out (may be NULL) receives them in the order of the pairs
 */
void it_cq_expect_set(struct rpma_cq *cq, int n, const enum ibv_wc_opcode *opcodes,
                      const uintptr_t *ctxs, struct ibv_wc *out);
/* the CQ must hold no completion right now */
void it_cq_expect_empty(struct rpma_cq *cq);
/* takes every pending completion event of a CQ whose fd is non-blocking; each take re-arms it */
void it_cq_take_events(struct rpma_cq *cq);

/* a name for a completion status (no libibverbs needed) */
const char *it_wc_status_str(enum ibv_wc_status status);

/* ---- providers ---- */

/*
 * How many shared-memory segments of the shm provider (memfds named rpma-shm) this process maps
 * now: one per connection that runs on shm, none for one that stayed on tcp.
 */
int it_shm_mappings(void);

/* ---- processes ---- */

/* fork(); the child gets its own alarm backstop. Call before the library is used. */
int it_fork(void);
/* waits for the child and requires that SIGKILL ended it */
void it_wait_killed(int pid);
/* sleeps up to seconds while waiting to be killed, then fails */
void it_wait_for_death(int seconds) __attribute__((noreturn));

/* fills buf with a pattern that depends on seed and the position */
void it_fill(void *buf, size_t len, uint64_t seed);
/* checks buf against it_fill(seed); returns the first bad index or -1 */
long it_verify(const void *buf, size_t len, uint64_t seed);

/* a 64-bit FNV-1a checksum */
uint64_t it_checksum(const void *buf, size_t len);

#endif /* RPMA_IT_COMMON_H */
