/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcp_peer.c -- raw TCP sockets over loopback, the ceiling for rpma's tcp provider.
 *
 * One command forks a server child and runs the client against it:
 *   tcp_peer bw  --size N [--time S] [--port P]      stream bandwidth: the client writes N-byte
 *                [--span B]                          buffers, the server reads and discards them;
 *                                                     with --span both cycle over B bytes (the
 *                                                     client's buffers one after another, the
 *                                                     server's reads further on each time), as
 *                                                     rpma-perf's requests in flight do
 *   tcp_peer lat [--size 8] [--time S] [--spin]      ping-pong: the client sends N bytes, the
 *                [--messages M]                      server echoes them back; with M > 1 the
 *                                                     client sends M messages of N bytes (one
 *                                                     write each) and the server answers N bytes
 *                                                     once all have come: the floor for an
 *                                                     operation a program posts as M requests
 *                                                     (rpma's write + flush: M = 2)
 *                [--server MODE]                     how the server waits (lat only):
 *                                                     block  blocking recv (the default)
 *                                                     epoll  rpma's engine: epoll_wait on the
 *                                                            socket (EPOLLET), then recv until a
 *                                                            short read or EAGAIN
 *                                                     epoll-spin  the same with epoll_wait(0) in
 *                                                            a loop, never sleeping: rpma's
 *                                                            engine while it polls
 *                                                     spin   recv(MSG_DONTWAIT) in a loop, never
 *                                                            sleeping: a target that keeps a core
 *                                                            (rpma's engine polls so while
 *                                                            requests come, RPMA_SPIN_US)
 *                                                     uring, uring-link, uring-plain,
 *                                                     uring-fixed, uring-pollfirst,
 *                                                     uring-multishot, uring-sqpoll, uring-poll
 *                                                            io_uring, where liburing was found
 *                                                            at build time (tcp_peer_uring.c)
 * --spin makes the client poll recv(MSG_DONTWAIT) instead of blocking in recv; the server blocks
 * either way unless --server says otherwise. TCP_NODELAY on both ends.
 * Prints one JSON object (with "server" only where --server was given); for bw, and for lat with
 * --server, server_cpu_s is the server's whole CPU time (user + sys).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#ifdef TCP_PEER_URING
#include "tcp_peer_uring.h"
#endif

struct opts {
    bool bw;
    size_t size;
    double time_s;
    int port;
    bool spin;
    int messages;       /* lat: writes per round trip */
    const char *server; /* lat: --server MODE, NULL for the default (block) */
    int cpu_pipe[2];    /* lat with --server: the server's CPU time, sent at its end */
    size_t span;        /* bw: bytes each side cycles its buffers over (0: one buffer) */
};

static void die(const char *what) {
    fprintf(stderr, "tcp_peer: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* listens on the first free port from *port up; *port becomes the one taken */
static int listen_on(int *port) {
    for (int i = 0; i < 32; i++, (*port)++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("socket");
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 4) == 0) return fd;
        if (errno != EADDRINUSE) die("bind/listen");
        close(fd);
    }
    die("bind: no free port");
    return -1;
}

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a))) die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static void write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("write");
        p += n;
        len -= (size_t)n;
    }
}

/* false on orderly EOF before anything was read */
static bool read_all(int fd, void *buf, size_t len, bool spin) {
    char *p = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv(fd, p + got, len - got, spin ? MSG_DONTWAIT : 0);
        if (n < 0 && (errno == EINTR || (spin && (errno == EAGAIN || errno == EWOULDBLOCK))))
            continue;
        if (n < 0) die("recv");
        if (n == 0) {
            if (got == 0) return false;
            errno = EPIPE;
            die("recv: short message");
        }
        got += (size_t)n;
    }
    return true;
}

/* rpma's engine thread: an EPOLLET wake-up, then recv until a short read or EAGAIN; with
 * timeout_ms 0 it never sleeps, as rpma's engine polls while requests come */
static void serve_epoll(int fd, size_t want, size_t answer, int timeout_ms) {
    size_t bufsz = want > 65536 ? want : 65536, got = 0;
    char *buf = malloc(bufsz);
    int ep = epoll_create1(0);
    if (!buf || ep < 0) die("epoll server");
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) die("epoll_ctl");
    for (bool eof = false; !eof;) {
        int ready = epoll_wait(ep, &ev, 1, timeout_ms);
        if (ready < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        if (ready == 0) continue;
        for (;;) {
            size_t room = bufsz - got;
            ssize_t n = recv(fd, buf + got, room, MSG_DONTWAIT);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            if (n < 0) die("recv");
            if (n == 0) eof = true;
            got += (size_t)n;
            if ((size_t)n < room) break; /* a short read drained the socket */
        }
        for (; got >= want; got -= want) {
            write_all(fd, buf, answer);
            memmove(buf, buf + want, got - want);
        }
    }
    close(ep);
    free(buf);
}

static void server(int lfd, const struct opts *o) {
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) die("accept");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    size_t bufsz =
        o->bw ? (o->size > (1u << 20) ? o->size : (1u << 20)) : o->size * (size_t)o->messages;
    if (o->bw && o->span > bufsz) bufsz = o->span;
    char *buf = malloc(bufsz);
    if (!buf) die("malloc");
    if (o->bw) {
        uint64_t total = 0;
        /* with --span, each read lands further on in the span, as RDMA writes fill a region */
        size_t chunk = o->span ? o->size : bufsz, at = 0;
        if (o->span) memset(buf, 0, bufsz);
        for (;;) {
            if (at + chunk > bufsz) at = 0;
            ssize_t n = read(fd, buf + at, chunk);
            if (n > 0) at += (size_t)n;
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) die("read");
            if (n == 0) break;
            total += (uint64_t)n;
        }
        /* the client half-closed: tell it how much arrived, and our CPU time */
        uint64_t reply[2] = {total, bench_cpu_ns()};
        write_all(fd, reply, sizeof(reply));
    } else if (o->server && !strcmp(o->server, "epoll")) {
        serve_epoll(fd, o->size * (size_t)o->messages, o->size, -1);
    } else if (o->server && !strcmp(o->server, "epoll-spin")) {
        serve_epoll(fd, o->size * (size_t)o->messages, o->size, 0);
    } else if (o->server && !strcmp(o->server, "spin")) {
        while (read_all(fd, buf, o->size * (size_t)o->messages, true)) write_all(fd, buf, o->size);
    } else if (o->server && strcmp(o->server, "block")) {
#ifdef TCP_PEER_URING
        if (uring_serve(fd, o->server, o->size * (size_t)o->messages, o->size)) die(o->server);
#endif
    } else {
        /* one read takes every message that has come, as a server reading frames does */
        while (read_all(fd, buf, o->size * (size_t)o->messages, false)) write_all(fd, buf, o->size);
    }
    close(fd);
    free(buf);
}

static int client(const struct opts *o) {
    int fd = connect_to(o->port);
    size_t slots = o->bw && o->span > o->size ? o->span / o->size : 1;
    char *buf = malloc(o->size * slots);
    if (!buf) die("malloc");
    memset(buf, 0x5a, o->size * slots);
    struct bench_lat lat;
    bench_lat_init(&lat);
    uint64_t ops = 0, cpu0 = bench_cpu_ns(), t0 = bench_now_ns();
    uint64_t deadline = t0 + (uint64_t)(o->time_s * 1e9), t1, server_cpu = 0;
    bool server_cpu_known = false;
    if (o->bw) {
        uint64_t now = t0;
        while (now < deadline) {
            for (int i = 0; i < 16; i++)
                write_all(fd, buf + (size_t)((ops + (uint64_t)i) % slots) * o->size, o->size);
            ops += 16;
            now = bench_now_ns();
        }
        shutdown(fd, SHUT_WR);
        uint64_t reply[2];
        if (!read_all(fd, reply, sizeof(reply), false)) die("no byte count from the server");
        t1 = bench_now_ns();
        if (reply[0] != ops * o->size) {
            fprintf(stderr, "tcp_peer: server got %llu bytes, client sent %llu\n",
                    (unsigned long long)reply[0], (unsigned long long)(ops * o->size));
            return 1;
        }
        server_cpu = reply[1];
        server_cpu_known = true;
    } else {
        uint64_t now = t0;
        while (now < deadline) {
            uint64_t s = bench_now_ns();
            for (int m = 0; m < o->messages; m++) write_all(fd, buf, o->size);
            if (!read_all(fd, buf, o->size, o->spin)) die("server closed");
            now = bench_now_ns();
            bench_lat_add(&lat, now - s);
            ops++;
        }
        t1 = now;
    }
    uint64_t cpu1 = bench_cpu_ns();
    close(fd);
    if (o->cpu_pipe[0] >= 0 && read(o->cpu_pipe[0], &server_cpu, sizeof(server_cpu)) > 0)
        server_cpu_known = true;
    double secs = (double)(t1 - t0) / 1e9;
    printf(
        "{\"peer\":\"tcp\",\"test\":\"%s\",\"size\":%zu,\"spin\":%s,\"messages\":%d,"
        "\"ops\":%llu,\"seconds\":%.6f,\"bw_bytes_per_s\":%.1f,\"rate\":%.1f,",
        o->bw ? "bw" : "lat", o->size, o->spin ? "true" : "false", o->messages,
        (unsigned long long)ops, secs, (double)ops * (double)o->size / secs, (double)ops / secs);
    if (o->server) printf("\"server\":\"%s\",", o->server);
    bench_lat_json(stdout, &lat);
    printf(",\"client_cpu_s\":%.4f", (double)(cpu1 - cpu0) / 1e9);
    /* the server's whole CPU time (it does nothing before the stream but accept) */
    if (server_cpu_known)
        printf(",\"server_cpu_s\":%.4f}\n", (double)server_cpu / 1e9);
    else
        printf(",\"server_cpu_s\":null}\n");
    bench_lat_free(&lat);
    free(buf);
    return 0;
}

/* lat's servers: block, epoll, spin, and the io_uring ones where liburing was found */
static bool server_known(const char *mode, bool bw) {
    if (bw) return false;
    if (!strcmp(mode, "block") || !strcmp(mode, "epoll") || !strcmp(mode, "epoll-spin") ||
        !strcmp(mode, "spin"))
        return true;
#ifdef TCP_PEER_URING
    return uring_server_known(mode);
#else
    return false;
#endif
}

int main(int argc, char *argv[]) {
    struct opts o = {.size = 8, .time_s = 3, .port = 47700, .messages = 1};
    if (argc < 2 || (strcmp(argv[1], "bw") && strcmp(argv[1], "lat"))) {
        fprintf(stderr,
                "usage: tcp_peer bw|lat [--size N] [--time S] [--port P] [--spin] "
                "[--messages M] [--server MODE] [--span B]\n");
        return 2;
    }
    o.bw = strcmp(argv[1], "bw") == 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--spin"))
            o.spin = true;
        else if (i + 1 < argc && !strcmp(argv[i], "--size"))
            o.size = bench_parse_size(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--time"))
            o.time_s = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--port"))
            o.port = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--messages"))
            o.messages = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--server"))
            o.server = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--span"))
            o.span = bench_parse_size(argv[++i]);
        else {
            fprintf(stderr, "tcp_peer: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (o.size == 0 || o.time_s <= 0 || o.messages < 1 || o.messages > 64 ||
        (o.bw && o.messages != 1)) {
        fprintf(stderr, "tcp_peer: --size and --time must be positive, --messages 1..64 (lat)\n");
        return 2;
    }
    if (o.server && !server_known(o.server, o.bw)) {
        fprintf(stderr, "tcp_peer: --server %s: not a server of %s in this build\n", o.server,
                argv[1]);
        return 2;
    }
    alarm((unsigned)o.time_s + 60);
    signal(SIGPIPE, SIG_IGN);
    o.cpu_pipe[0] = o.cpu_pipe[1] = -1;
    if (o.server && pipe(o.cpu_pipe)) die("pipe");
    int lfd = listen_on(&o.port);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        server(lfd, &o);
        uint64_t cpu = bench_cpu_ns();
        if (o.cpu_pipe[1] >= 0) write_all(o.cpu_pipe[1], &cpu, sizeof(cpu));
        _exit(0);
    }
    close(lfd);
    if (o.server) close(o.cpu_pipe[1]);
    int rc = client(&o);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) rc = 1;
    return rc;
}
