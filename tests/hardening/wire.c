/* SPDX-License-Identifier: BSD-3-Clause */
/* wire.c -- raw-socket helpers for the hostile-peer tests */
#define _GNU_SOURCE
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

long long w_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int w_version(void) {
    static int v;
    if (!v) {
        const char *e = getenv("RPMA_TEST_WIRE_VERSION");
        v = e && strcmp(e, "1") == 0 ? 1 : W_VERSION;
    }
    return v;
}

size_t w_header_size(void) {
    return w_version() == 1 ? 32 : W_HEADER_SIZE;
}

void w_mr_decode(const uint8_t *d, struct w_mr *mr) {
    memset(mr, 0, sizeof(*mr));
    for (int i = 7; i >= 0; i--) mr->addr = mr->addr << 8 | d[i];
    for (int i = 7; i >= 0; i--) mr->len = mr->len << 8 | d[8 + i];
    for (int i = 3; i >= 0; i--) mr->rkey = mr->rkey << 8 | d[16 + i];
    mr->usage = d[20];
}

void w_random(void *buf, size_t len) {
    uint8_t *p = buf;
    while (len) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            IT_FAIL("getrandom: %s", strerror(errno));
        }
        p += n;
        len -= (size_t)n;
    }
}

uint64_t w_random64(void) {
    uint64_t v;
    w_random(&v, sizeof(v));
    return v;
}

static bool wait_fd(int fd, short ev, long long deadline) {
    for (;;) {
        long long left = deadline - w_now_ms();
        if (left < 0) left = 0;
        struct pollfd p = {.fd = fd, .events = ev};
        int n = poll(&p, 1, (int)left);
        if (n > 0) return true;
        if (n == 0) return false;
        if (errno != EINTR) IT_FAIL("poll: %s", strerror(errno));
    }
}

int w_connect(const char *addr, const char *port, int timeout_ms) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(addr, port, &hints, &res) != 0 || !res) IT_FAIL("cannot resolve %s", addr);
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) IT_FAIL("socket: %s", strerror(errno));
    int r = connect(fd, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    if (r != 0 && errno != EINPROGRESS) goto fail;
    if (r != 0) {
        if (!wait_fd(fd, POLLOUT, w_now_ms() + timeout_ms)) {
            errno = ETIMEDOUT;
            goto fail;
        }
        int err = 0;
        socklen_t el = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            errno = err;
            goto fail;
        }
    }
    /* blocking from here on; every read below is bounded by poll */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
fail : {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}
}

void w_close_rst(int fd) {
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    close(fd);
}

bool w_send_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += n;
        len -= (size_t)n;
    }
    return true;
}

int w_recv_exact(int fd, void *buf, size_t len, int timeout_ms) {
    long long deadline = w_now_ms() + timeout_ms;
    char *p = buf;
    while (len) {
        if (!wait_fd(fd, POLLIN, deadline)) return -1;
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return 0;
        p += n;
        len -= (size_t)n;
    }
    return 1;
}

long w_wait_closed(int fd, int timeout_ms) {
    long long start = w_now_ms(), deadline = start + timeout_ms;
    static char sink[65536];
    for (;;) {
        if (!wait_fd(fd, POLLIN, deadline)) return -1;
        ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return (long)(w_now_ms() - start);
    }
}

void w_hello_init(struct w_hello *h, uint8_t role, uint64_t token) {
    memset(h, 0, sizeof(*h));
    h->magic = W_MAGIC;
    h->version = (uint16_t)w_version();
    h->role = role;
    h->token = token;
    h->qp_num = 0x1234;
}

void w_conn_open(struct w_conn *c, const char *addr, const char *port) {
    memset(c, 0, sizeof(*c));
    uint64_t token = w_random64();
    struct w_hello h;
    c->main_fd = w_connect(addr, port, 2000);
    if (c->main_fd < 0) IT_FAIL("connect main stream: %s", strerror(errno));
    w_hello_init(&h, W_ROLE_MAIN, token);
    CHECK(w_send_all(c->main_fd, &h, sizeof(h)));
    c->join_fd = w_connect(addr, port, 2000);
    if (c->join_fd < 0) IT_FAIL("connect join stream: %s", strerror(errno));
    w_hello_init(&h, W_ROLE_JOIN, token);
    CHECK(w_send_all(c->join_fd, &h, sizeof(h)));
    int r = w_recv_exact(c->main_fd, &c->reply, sizeof(c->reply), 5000);
    if (r != 1) IT_FAIL("no reply to a valid handshake (%s)", r < 0 ? "timeout" : "closed");
    CHECK_EQ(c->reply.magic, W_MAGIC);
    CHECK_EQ(c->reply.kind, W_REPLY_ACCEPT);
    CHECK(c->reply.pdata_len >= 43);
    w_mr_decode(c->reply.pdata, &c->mr);
    w_mr_decode(c->reply.pdata + 21, &c->ro);
}

void w_conn_close(struct w_conn *c) {
    if (c->main_fd >= 0) close(c->main_fd);
    if (c->join_fd >= 0) close(c->join_fd);
    c->main_fd = c->join_fd = -1;
}

bool w_frame_send_hdr(int fd, const struct w_frame *f, const void *payload, size_t payload_len) {
    size_t hl = w_header_size();
    char buf[W_HEADER_SIZE + 4096];
    if (payload_len <= 4096) {
        memcpy(buf, f, hl);
        if (payload_len) memcpy(buf + hl, payload, payload_len);
        return w_send_all(fd, buf, hl + payload_len);
    }
    return w_send_all(fd, f, hl) && w_send_all(fd, payload, payload_len);
}

bool w_frame_send(int fd, uint8_t op, uint8_t flags, uint32_t length, uint32_t rkey, uint64_t addr,
                  uint64_t aux, const void *payload, size_t payload_len) {
    struct w_frame f = {
        .op = op, .flags = flags, .length = length, .rkey = rkey, .addr = addr, .aux = aux};
    return w_frame_send_hdr(fd, &f, payload, payload_len);
}

int w_frame_recv(int fd, struct w_frame *f, int timeout_ms) {
    memset(f, 0, sizeof(*f));
    return w_recv_exact(fd, f, w_header_size(), timeout_ms);
}
