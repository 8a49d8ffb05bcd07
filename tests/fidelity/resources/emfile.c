/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * emfile.c -- a listener out of file descriptors backs off instead of spinning.
 *
 * The server lowers RLIMIT_NOFILE to a few descriptors above what it holds; the client opens
 * RAW_CONNS plain TCP connections to it (they never send a Hello), so accept fails with EMFILE
 * while connections wait in the backlog. Where the server takes shared-memory offers (any
 * RPMA_PROVIDER but tcp) the client also opens RAW_CONNS connections to its offer socket, the
 * abstract unix socket "@rpma-shm:PORT" (docs/shm-provider.md), that never send an offer. Over
 * WINDOW_MS in that state the server must spend under 5% of one core (getrusage: all threads)
 * and log at most MAX_LINES warnings per listening socket (counted with rpma_log_set_function).
 * Then the client closes its sockets and a real rpma connection must succeed: the listener recovers
 * on its own (with RPMA_PROVIDER=shm, on shared memory, or it is refused).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define RAW_CONNS 64
#define SPARE_FDS 16   /* above what the listening server holds */
#define WINDOW_MS 2000 /* measured in the exhausted state */
#define MAX_LINES 5    /* per listening socket */
/* CPU time, not wall time: a listener that backs off uses about 0.02%, loaded or not */
#define MAX_CPU_PCT 5
#define CLIENT_HOLD_MS 3500 /* the client holds its sockets this long */

static int lines;           /* warnings and errors logged */
static int accept_failures; /* of them, about accept */

static void counter(enum rpma_log_level level, const char *file, const int line, const char *func,
                    const char *fmt, ...) {
    (void)file;
    (void)line;
    (void)func;
    if (level > RPMA_LOG_LEVEL_WARNING) return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    int n = __atomic_add_fetch(&lines, 1, __ATOMIC_RELAXED);
    if (strstr(msg, "accept")) __atomic_add_fetch(&accept_failures, 1, __ATOMIC_RELAXED);
    if (n <= 10) fprintf(stderr, "[server log] %s\n", msg);
}

static long long cpu_us(void) {
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
    return (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec +
           ru.ru_stime.tv_usec;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Whether the server listens on an offer socket beside its tcp socket. */
static bool takes_offers(void) {
    const char *provider = getenv("RPMA_PROVIDER");
    return !provider || strcmp(provider, "tcp") != 0;
}

static void server(const struct it_args *a) {
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_NOTICE));
    CHECK_OK(rpma_log_set_function(counter));
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    int held = it_open_fds();
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    rl.rlim_cur = (rlim_t)(held + SPARE_FDS);
    CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    printf("server holds %d descriptors; limit %d\n", held, held + SPARE_FDS);
    it_ready();

    /* the client's connections fill the descriptors: wait for the first accept failure */
    long long deadline = it_now_ms() + 10000;
    while (__atomic_load_n(&accept_failures, __ATOMIC_RELAXED) == 0) {
        if (it_now_ms() > deadline) IT_FAIL("accept never failed: is the limit effective?");
        sleep_ms(5);
    }
    int lines0 = __atomic_load_n(&lines, __ATOMIC_RELAXED);
    long long cpu0 = cpu_us(), t0 = it_now_ms();
    sleep_ms(WINDOW_MS);
    long long cpu = cpu_us() - cpu0, wall = it_now_ms() - t0;
    int logged = __atomic_load_n(&lines, __ATOMIC_RELAXED) - lines0;
    int pct = (int)(cpu * 100 / (wall * 1000));
    printf("out of descriptors for %lld ms: %lld us of CPU (%d%% of a core), %d log lines\n", wall,
           cpu, pct, logged);
    int max_lines = MAX_LINES * (takes_offers() ? 2 : 1);
    if (pct >= MAX_CPU_PCT || logged > max_lines)
        IT_FAIL("the listener spun: %d%% of a core (under %d%% wanted), %d log lines (at most %d)",
                pct, MAX_CPU_PCT, logged, max_lines);

    /* the client lets go of its sockets, then connects for real */
    struct rpma_conn_req *req = it_next_req(ep, NULL);
    struct rpma_conn *conn = it_accept(&req, NULL, 0);
    printf("accepted a connection after the descriptors came back\n");
    it_disconnect_passive(&conn, false);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_peer_delete(&peer));
    printf("%d log lines in all\n", __atomic_load_n(&lines, __ATOMIC_RELAXED));
    CHECK_OK(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION));
}

static void client(const struct it_args *a) {
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(a->port))};
    CHECK(inet_pton(AF_INET, a->addr, &sin.sin_addr) == 1);
    int fds[RAW_CONNS];
    for (int k = 0; k < RAW_CONNS; k++) {
        fds[k] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(fds[k] >= 0);
        /* the kernel completes the handshake into the backlog whether or not it is accepted */
        if (connect(fds[k], (struct sockaddr *)&sin, sizeof(sin)) != 0)
            IT_FAIL("raw connect %d: %s", k, strerror(errno));
    }
    printf("client: %d raw connections open\n", RAW_CONNS);
    /* the same at the offer socket, where the server has one */
    int offer_fds[RAW_CONNS], offers = 0;
    if (takes_offers()) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        int n = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1, "rpma-shm:%s", a->port);
        socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
        for (; offers < RAW_CONNS; offers++) {
            offer_fds[offers] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
            CHECK(offer_fds[offers] >= 0);
            if (connect(offer_fds[offers], (struct sockaddr *)&sun, len) != 0)
                IT_FAIL("raw connect to the offer socket %d: %s", offers, strerror(errno));
        }
        printf("client: %d raw connections to the offer socket open\n", offers);
    }
    sleep_ms(CLIENT_HOLD_MS);
    for (int k = 0; k < RAW_CONNS; k++) close(fds[k]);
    for (int k = 0; k < offers; k++) close(offer_fds[k]);
    printf("client: raw connections closed\n");

    struct rpma_peer *peer = it_peer_new(a->addr, false);
    long long t0 = it_now_ms();
    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    printf("client: connected %lld ms after closing\n", it_now_ms() - t0);
    it_disconnect_active(&conn);
    CHECK_OK(rpma_peer_delete(&peer));
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    alarm(20);
    if (a.server)
        server(&a);
    else
        client(&a);
    printf("emfile %s: passed\n", a.server ? "server" : "client");
    return 0;
}
