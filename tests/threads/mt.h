/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mt.h -- helpers of the multi-threaded tests, on top of the integration tests' common.h.
 */
#ifndef RPMA_MT_H
#define RPMA_MT_H

#include <pthread.h>
#include <stdatomic.h>

#include "common.h"

/* a deterministic value for (a, b, c): both processes replay the same sequence */
static inline uint64_t mt_rand3(uint64_t a, uint64_t b, uint64_t c) {
    uint64_t x = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL) * 0xbf58476d1ce4e5b9ULL ^
                 (c + 1) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    return x ^ (x >> 32);
}

/* starts n threads running fn(&args[k]), each k given its own slot of args */
static inline void mt_start(pthread_t *th, int n, void *(*fn)(void *), void *args,
                            size_t arg_size) {
    for (int k = 0; k < n; k++)
        if (pthread_create(&th[k], NULL, fn, (char *)args + (size_t)k * arg_size) != 0)
            IT_FAIL("pthread_create failed");
}

static inline void mt_join(pthread_t *th, int n) {
    for (int k = 0; k < n; k++)
        if (pthread_join(th[k], NULL) != 0) IT_FAIL("pthread_join failed");
}

/* runs n threads of fn, thread k given a pointer to the int k, and waits for them all */
void mt_run(int n, void *(*fn)(void *));

/* makes fd non-blocking, so that several threads may poll it and none blocks in the library */
void mt_set_nonblock(int fd);

/*
 * Several server threads taking connection requests from one endpoint (its fd non-blocking):
 * the next request, with cfg, or NULL once *accepted reached total. Counts it in *accepted.
 * Takes api_lock around the endpoint's calls, which are not thread-safe. Fails after 30 s
 * without one.
 */
struct rpma_conn_req *mt_next_req(struct rpma_ep *ep, int ep_fd, struct rpma_conn_cfg *cfg,
                                  atomic_long *accepted, long total, pthread_mutex_t *api_lock);

/*
 * The server of a request/answer test: listens, accepts one connection (a receive of len bytes
 * posted on the request), runs after_accept(ep) if not NULL, answers each of the connection's
 * messages with one of len bytes (at least an int), then waits for CLOSED and cleans up.
 */
void mt_answer_server(const struct it_args *a, int messages, size_t len,
                      void (*after_accept)(struct rpma_ep *ep));

/* the client of mt_answer_server: a region of two len-byte slots (send, then receive) and a
 * connection whose receives complete on their own CQ of slots entries (and as many receives) */
struct mt_rcq_client {
    struct rpma_peer *peer;
    char *buf;
    struct rpma_mr_local *mr;
    struct rpma_conn_cfg *cfg;
    struct rpma_conn *conn;
    struct rpma_cq *cq, *rcq;
};
void mt_rcq_client_open(const struct it_args *a, size_t len, int slots, struct mt_rcq_client *c);
/* disconnects (this side ends it) and frees everything */
void mt_rcq_client_close(struct mt_rcq_client *c);

/* an optional numeric argument k of the scenario, or def */
long mt_arg(const struct it_args *a, int k, long def);

#endif /* RPMA_MT_H */
