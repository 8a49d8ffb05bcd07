/* SPDX-License-Identifier: BSD-3-Clause */
/* tcp_peer_uring.h -- tcp_peer lat's io_uring servers (built where liburing is found) */
#ifndef RPMA_BENCH_TCP_PEER_URING_H
#define RPMA_BENCH_TCP_PEER_URING_H

#include <stdbool.h>
#include <stddef.h>

/* true when name is one of the variants tcp_peer's usage lists (uring, uring-link, ...) */
bool uring_server_known(const char *name);

/*
 * Serves lat's ping-pong on fd until the client closes it: takes want bytes (in as many
 * completions as they arrive in), answers with the first answer bytes, and submits that answer
 * together with the next request's receive. Returns 0 at EOF, -1 with errno set on a failure.
 */
int uring_serve(int fd, const char *name, size_t want, size_t answer);

#endif
