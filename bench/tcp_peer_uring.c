/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcp_peer_uring.c -- tcp_peer lat's io_uring servers: what an io_uring-driven rpma target could
 * save against its epoll engine (docs/rc-rebuild.md, step (h)). Each answer's send and the next
 * request's receive go into the ring together and cost one io_uring_submit_and_wait; a request
 * that comes in pieces (write+flush: two frames) costs one more per piece.
 *   uring            SINGLE_ISSUER | DEFER_TASKRUN: completions are run only when we wait
 *   uring-link       the same, the receive linked behind the send (IOSQE_IO_LINK)
 *   uring-plain      no setup flags: completions run as task work whenever they come
 *   uring-fixed      uring, with the socket and the ring's fd registered (no fd look-ups)
 *   uring-pollfirst  uring, each receive armed without the first try (IORING_RECVSEND_POLL_FIRST):
 *                    it is queued beside the answer, so its bytes cannot have come yet
 *   uring-multishot  uring, one multishot receive into a registered buffer ring for the whole run
 *   uring-sqpoll     a kernel thread polls the submission queue (burns a core while busy)
 *   uring-poll       the ring only waits (a poll for input, queued with the answer); the bytes
 *                    are read by recv, as a thread that takes the stream could read them too
 */
#define _GNU_SOURCE
#include "tcp_peer_uring.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#define DEFER (IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN)
#define STAGING 65536 /* the receive buffer: as large as a frame reader's */
#define RING_BUFS 8   /* multishot: provided buffers, RING_BUF bytes each */
#define RING_BUF 4096

enum { kRecv = 1, kSend = 2, kPoll = 3 };

struct variant {
    const char *name;
    unsigned setup;
    bool link, fixed, poll_first, multishot, poll;
};

static const struct variant variants[] = {
    {.name = "uring", .setup = DEFER},
    {.name = "uring-link", .setup = DEFER, .link = true},
    {.name = "uring-plain", .setup = 0},
    {.name = "uring-fixed", .setup = DEFER, .fixed = true},
    {.name = "uring-pollfirst", .setup = DEFER, .poll_first = true},
    {.name = "uring-multishot", .setup = DEFER, .multishot = true},
    {.name = "uring-sqpoll", .setup = IORING_SETUP_SQPOLL},
    {.name = "uring-poll", .setup = DEFER, .poll = true},
};

static const struct variant *find(const char *name) {
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++)
        if (!strcmp(variants[i].name, name)) return &variants[i];
    return NULL;
}

bool uring_server_known(const char *name) {
    return find(name) != NULL;
}

struct server {
    struct io_uring ring;
    const struct variant *v;
    int sock;           /* the socket */
    int fd;             /* the socket, or its index among the registered files */
    unsigned sqe_flags; /* IOSQE_FIXED_FILE where the socket is registered */
    char *buf, *answer, *bufs;
    size_t bufsz, got, answer_len;
    struct io_uring_buf_ring *br;
    bool armed; /* multishot: the receive is still live */
    bool eof;
};

static struct io_uring_sqe *next_sqe(struct server *s, uint64_t what) {
    /* at most a send and a receive are queued, and the ring holds 8 */
    struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
    io_uring_sqe_set_data64(sqe, what);
    return sqe;
}

static void queue_recv(struct server *s) {
    if (s->v->poll) {
        io_uring_prep_poll_add(next_sqe(s, kPoll), s->fd, POLLIN);
        return;
    }
    if (s->v->multishot) {
        if (s->armed) return;
        struct io_uring_sqe *sqe = next_sqe(s, kRecv);
        io_uring_prep_recv_multishot(sqe, s->fd, NULL, 0, 0);
        sqe->flags |= s->sqe_flags | IOSQE_BUFFER_SELECT;
        sqe->buf_group = 0;
        s->armed = true;
        return;
    }
    struct io_uring_sqe *sqe = next_sqe(s, kRecv);
    io_uring_prep_recv(sqe, s->fd, s->buf + s->got, s->bufsz - s->got, 0);
    sqe->flags |= s->sqe_flags;
    if (s->v->poll_first) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
}

static void queue_send(struct server *s) {
    /* its own buffer: an unlinked receive may land in the staging buffer before the send reads */
    memcpy(s->answer, s->buf, s->answer_len);
    struct io_uring_sqe *sqe = next_sqe(s, kSend);
    io_uring_prep_send(sqe, s->fd, s->answer, s->answer_len, 0);
    sqe->flags |= s->sqe_flags | (s->v->link ? IOSQE_IO_LINK : 0);
}

/* a multishot completion's bytes into the staging buffer, and its buffer back to the ring */
static void take_buffer(struct server *s, const struct io_uring_cqe *cqe) {
    unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
    char *b = s->bufs + (size_t)bid * RING_BUF;
    size_t n = (size_t)cqe->res;
    if (n > s->bufsz - s->got) n = s->bufsz - s->got;
    memcpy(s->buf + s->got, b, n);
    io_uring_buf_ring_add(s->br, b, RING_BUF, (unsigned short)bid, RING_BUFS - 1, 0);
    io_uring_buf_ring_advance(s->br, 1);
}

/* uring-poll's reads after the wake-up: recv until a short read or EAGAIN, as epoll's do */
static int read_ready(struct server *s) {
    for (;;) {
        size_t room = s->bufsz - s->got;
        ssize_t n = recv(s->sock, s->buf + s->got, room, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (n < 0) return -1;
        if (n == 0) s->eof = true;
        s->got += (size_t)n;
        if ((size_t)n < room) return 0;
    }
}

/* takes every completion there is; -1 with errno on a failed one */
static int reap(struct server *s) {
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    int rc = 0;
    io_uring_for_each_cqe(&s->ring, head, cqe) {
        n++;
        if (rc) continue;
        if (s->v->multishot && cqe->user_data == kRecv && !(cqe->flags & IORING_CQE_F_MORE))
            s->armed = false;
        if (cqe->user_data == kSend) {
            if (cqe->res == (int)s->answer_len) continue;
            errno = cqe->res < 0 ? -cqe->res : EIO;
            rc = -1;
        } else if (cqe->user_data == kPoll && cqe->res > 0) {
            rc = read_ready(s);
        } else if (cqe->res == -ENOBUFS && s->v->multishot) {
            continue; /* every buffer was out: the receive is queued again below */
        } else if (cqe->res < 0) {
            errno = -cqe->res;
            rc = -1;
        } else if (cqe->res == 0) {
            s->eof = true;
        } else {
            if (s->v->multishot) take_buffer(s, cqe);
            s->got += (size_t)cqe->res;
        }
    }
    io_uring_cq_advance(&s->ring, n);
    return rc;
}

static int setup(struct server *s, int fd) {
    struct io_uring_params p = {.flags = s->v->setup, .sq_thread_idle = 1000};
    int r = io_uring_queue_init_params(8, &s->ring, &p);
    if (r < 0) goto fail;
    s->sock = s->fd = fd;
    if (s->v->fixed) {
        if ((r = io_uring_register_files(&s->ring, &fd, 1)) < 0) goto fail_ring;
        if ((r = io_uring_register_ring_fd(&s->ring)) < 0) goto fail_ring;
        s->fd = 0;
        s->sqe_flags = IOSQE_FIXED_FILE;
    }
    if (!s->v->multishot) return 0;
    s->br = mmap(NULL, RING_BUFS * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
                 MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    s->bufs = malloc((size_t)RING_BUFS * RING_BUF);
    if (s->br == MAP_FAILED || !s->bufs) {
        r = -ENOMEM;
        goto fail_ring;
    }
    struct io_uring_buf_reg reg = {.ring_addr = (uintptr_t)s->br, .ring_entries = RING_BUFS};
    if ((r = io_uring_register_buf_ring(&s->ring, &reg, 0)) < 0) goto fail_ring;
    io_uring_buf_ring_init(s->br);
    for (int i = 0; i < RING_BUFS; i++)
        io_uring_buf_ring_add(s->br, s->bufs + (size_t)i * RING_BUF, RING_BUF, (unsigned short)i,
                              RING_BUFS - 1, i);
    io_uring_buf_ring_advance(s->br, RING_BUFS);
    return 0;
fail_ring:
    io_uring_queue_exit(&s->ring);
fail:
    errno = -r;
    return -1;
}

int uring_serve(int fd, const char *name, size_t want, size_t answer) {
    struct server s = {.v = find(name), .answer_len = answer};
    if (!s.v || answer > want) {
        errno = EINVAL;
        return -1;
    }
    s.bufsz = want > STAGING ? want : STAGING;
    s.buf = malloc(s.bufsz);
    s.answer = malloc(answer);
    int rc = -1;
    if (!s.buf || !s.answer) {
        errno = ENOMEM;
        goto out;
    }
    if (setup(&s, fd)) goto out;
    queue_recv(&s);
    unsigned wait = 1;
    for (;;) {
        /* a multishot receive may have completed already: no system call for it then */
        if (io_uring_sq_ready(&s.ring) || io_uring_cq_ready(&s.ring) < wait) {
            int r = io_uring_submit_and_wait(&s.ring, wait);
            if (r < 0 && r != -EINTR) {
                errno = -r;
                break;
            }
        }
        if (reap(&s)) break;
        if (s.eof) {
            rc = 0;
            break;
        }
        if (s.got < want) {
            queue_recv(&s);
            wait = 1;
            continue;
        }
        /* the answer and the wait for the next request, in one call */
        queue_send(&s);
        s.got -= want;
        memmove(s.buf, s.buf + want, s.got);
        queue_recv(&s);
        wait = 2;
    }
    io_uring_queue_exit(&s.ring);
    if (s.br) munmap(s.br, RING_BUFS * sizeof(struct io_uring_buf));
out:
    free(s.bufs);
    free(s.answer);
    free(s.buf);
    return rc;
}
