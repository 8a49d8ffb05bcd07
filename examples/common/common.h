/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * common.h -- the few steps every example repeats: checking calls, making a peer, connecting,
 * waiting (always with a time limit) for connection events and completions, and mapping memory
 * that may be backed by a file.
 *
 * On any failure the helpers print one line, "EXAMPLE/PROGRAM: what went wrong", and end the
 * process with status 1, so that each example reads as a straight list of steps. A failed librpma
 * call is reported with the cause the library logged (why.h, shared with rpma-perf).
 */
#ifndef EXAMPLES_COMMON_H
#define EXAMPLES_COMMON_H

#include <librpma.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "why.h"

/* RPMA_TEST_TIME_SCALE (default 1) multiplies the two bounds below, for slow machines such as the
 * emulated soft-RoCE guest the test suite also runs the examples in */
int ex_time_scale(void);

/* longest wait for one connection event, connection request or completion */
#define EX_WAIT_MS (10000 * ex_time_scale())

/* the longest an example may run at all; a hang ends the process instead of the test run */
#define EX_BACKSTOP_S (60 * ex_time_scale())

/* prints "PROGRAM: message" to stderr and exits with status 1 */
void ex_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

#define EX_FAIL(...) ex_fail(__VA_ARGS__)

/* after a librpma call failed (why: what why_end() returned): prints the cause the library logged,
 * or else "what: why", and exits with status 1 */
void ex_fail_call(const char *why, const char *what_fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

/* the librpma call must return 0; a failure names the function, never the expression */
#define EX_CHECK(call)                                                       \
    do {                                                                     \
        why_begin();                                                         \
        int ex_ret_ = (call);                                                \
        const char *ex_why_ = why_end(ex_ret_);                              \
        if (ex_ret_ != 0) ex_fail_call(ex_why_, "%s failed", why_fn(#call)); \
    } while (0)

/* the condition must hold: a bug in the example, hence the source location */
#define EX_ASSERT(cond)                                                                 \
    do {                                                                                \
        if (!(cond)) EX_FAIL("%s:%d: assertion failed: %s", __FILE__, __LINE__, #cond); \
    } while (0)

/* line-buffered stdout, the time backstop and the library's causes in error lines (why.h); call
 * first in main() */
void ex_start(void);

/* a peer on the device behind addr; a server looks for a local address, a client a remote one */
struct rpma_peer *ex_peer_new(const char *addr, bool server);

/* starts listening and prints the line the test runner waits for */
struct rpma_ep *ex_listen(struct rpma_peer *peer, const char *addr, const char *port);

/* waits for the next connection request */
struct rpma_conn_req *ex_next_conn_req(struct rpma_ep *ep, const struct rpma_conn_cfg *cfg);

/* waits for the next connection event */
enum rpma_conn_event ex_next_event(struct rpma_conn *conn);

/* the next connection event must be the given one */
void ex_expect_event(struct rpma_conn *conn, enum rpma_conn_event expected);

/* accepts an incoming request (pdata may be NULL) and waits until it is ESTABLISHED. On an RDMA
 * NIC the first event may be CLOSED instead, when the client disconnected at once: the kernel's
 * connection manager may handle the client's disconnect before its ready-to-use message. That
 * connection is returned too, and ex_wait_closed takes its CLOSED without waiting again. */
struct rpma_conn *ex_accept(struct rpma_conn_req **req, const void *pdata, size_t pdata_len);

/* connects to addr:port (pdata may be NULL) and waits until it is ESTABLISHED */
struct rpma_conn *ex_connect(struct rpma_peer *peer, const char *addr, const char *port,
                             const struct rpma_conn_cfg *cfg, const void *pdata, size_t pdata_len);

/* the side that ends the connection: disconnect, wait for CLOSED, delete */
void ex_disconnect(struct rpma_conn **conn);

/* the other side: wait for CLOSED, then disconnect and delete */
void ex_wait_closed(struct rpma_conn **conn);

/* the remote memory region described at offset off of the server's private data */
struct rpma_mr_remote *ex_remote_mr_from_pdata(struct rpma_conn *conn, size_t off);

/*
 * waits until the file descriptor is readable; false on timeout
 */
bool ex_poll_fd(int fd, int timeout_ms);

/*
 * takes the next completion from cq, waiting for it (rpma_cq_wait) when the CQ is empty
 */
void ex_cq_next(struct rpma_cq *cq, struct ibv_wc *wc);

/* the next completion must be a success with this opcode and op_context */
void ex_cq_expect(struct rpma_cq *cq, enum ibv_wc_opcode opcode, const void *op_context,
                  struct ibv_wc *wc_out);

/* page-aligned zeroed memory */
void *ex_malloc(size_t size);

/* memory that is either a MAP_SHARED mapping of a file or plain DRAM */
struct ex_mem {
    void *ptr;
    size_t size;
    int fd; /* -1 for DRAM */
};

/* maps size bytes of path (created or extended as needed), or allocates DRAM if path is NULL */
void ex_mem_map(const char *path, size_t size, struct ex_mem *mem);

/* makes [off, off + len) durable: msync(MS_SYNC) of its pages for a file, nothing for DRAM */
void ex_mem_persist(const struct ex_mem *mem, size_t off, size_t len);

void ex_mem_unmap(struct ex_mem *mem);

/* prints the string an earlier run left at the start of the file mapped in mem (terminating the
 * mapping with a NUL), or that the file holds none: a new file is all zeros */
void ex_mem_print_earlier(struct ex_mem *mem, const char *path);

#endif /* EXAMPLES_COMMON_H */
