/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lost_cause.c -- when a peer process dies (SIGKILL) mid-connection, the survivor gets
 * RPMA_CONN_CLOSED, as on RDMA (the dying process's kernel disconnects its connections: a DREQ
 * on RDMA CM, the end of its streams on tcp), and with rpma its log line names the real cause
 * (the peer closed the stream, a reset, a failed send), not a stale errno text left from an
 * earlier call such as "Resource temporarily unavailable", nor a bare "protocol error".
 *
 * The server captures the library's log (rpma_log_set_function, threshold NOTICE). For each
 * round the client process forks a child that connects, sends a hello and then kills itself:
 *   round % 3 == 0  while the connection is idle
 *   round % 3 == 1  while the server keeps writing into the child's region
 *   round % 3 == 2  while the child keeps writing into the server's region
 * The server prints each "connection closed without a disconnect: " line it got and requires one
 * per round, free of the two stale texts (not on the reference, whose log is its own).
 *
 * Arguments (both roles): [ROUNDS], default 6.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define ALARM_S 45
#define REGION (1 << 20)
#define CHUNK (64 * 1024)
#define MSG 16
#define WR_HELLO 0x4e
#define LINES 64
#define LINE_LEN 512
#define LOST_PREFIX "connection closed without a disconnect: "

static int rounds_n = 6;

static const char *scenario_name(int round) {
    switch (round % 3) {
        case 0:
            return "killed while idle";
        case 1:
            return "killed while the server writes to it";
        default:
            return "killed while it writes to the server";
    }
}

/* ---- the server's log capture ---- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_lines[LINES][LINE_LEN];
static int log_n;

static void capture(enum rpma_log_level level, const char *file_name, const int line_no,
                    const char *function_name, const char *message_format, ...) {
    char msg[LINE_LEN];
    va_list ap;
    va_start(ap, message_format);
    vsnprintf(msg, sizeof(msg), message_format, ap);
    va_end(ap);
    fprintf(stderr, "[library log, level %d] %s:%d %s(): %s\n", (int)level,
            file_name ? file_name : "?", line_no, function_name ? function_name : "?", msg);
    pthread_mutex_lock(&log_mu);
    if (log_n < LINES) snprintf(log_lines[log_n++], LINE_LEN, "%s", msg);
    pthread_mutex_unlock(&log_mu);
}

/* the LOST_PREFIX lines logged since line `from`; fails unless exactly the right kind */
static void check_lost_lines(int from, int round) {
    int found = 0;
    pthread_mutex_lock(&log_mu);
    for (int i = from; i < log_n; i++) {
        const char *at = strstr(log_lines[i], LOST_PREFIX);
        if (!at) continue;
        found++;
        const char *why = at + strlen(LOST_PREFIX);
        printf("round %d (%s): log: %s\n", round, scenario_name(round), log_lines[i]);
        if (strstr(why, "Resource temporarily unavailable") || strstr(why, "protocol error")) {
            pthread_mutex_unlock(&log_mu);
            IT_FAIL(
                "round %d (%s): the log names a stale cause: \"%s\" (expected the end of the "
                "stream, a reset or a failed send)",
                round, scenario_name(round), log_lines[i]);
        }
    }
    pthread_mutex_unlock(&log_mu);
    if (found == 0)
        IT_FAIL("round %d (%s): no \"" LOST_PREFIX "\" line in the library's log at NOTICE", round,
                scenario_name(round));
}

static int log_mark(void) {
    pthread_mutex_lock(&log_mu);
    int n = log_n;
    pthread_mutex_unlock(&log_mu);
    return n;
}

/* ---- server ---- */

static void server(const struct it_args *a) {
    CHECK_OK(rpma_log_set_function(capture));
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_NOTICE));
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *region = it_alloc(REGION), *rbuf = it_alloc(MSG);
    struct rpma_mr_local *mr = NULL, *rmr = NULL;
    CHECK_OK(
        rpma_mr_reg(peer, region, REGION, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_WRITE_SRC, &mr));
    CHECK_OK(rpma_mr_reg(peer, rbuf, MSG, RPMA_MR_USAGE_RECV, &rmr));
    char desc[IT_MR_DESC_SIZE];
    CHECK_OK(rpma_mr_get_descriptor(mr, desc));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();

    for (int r = 0; r < rounds_n; r++) {
        struct rpma_conn_req *req = it_next_req(ep, NULL);
        CHECK_OK(rpma_conn_req_recv(req, rmr, 0, MSG, (void *)WR_HELLO));
        struct rpma_conn *conn = it_accept(&req, desc, sizeof(desc));
        int mark = log_mark();
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conn, &cq));
        it_cq_expect(cq, IBV_WC_RECV, (void *)WR_HELLO);
        int evfd = -1;
        CHECK_OK(rpma_conn_get_event_fd(conn, &evfd));

        if (r % 3 == 1) { /* write into the child's region until the connection ends */
            struct rpma_mr_remote *dst = it_remote_mr(conn, 0);
            int inflight = 0, posted = 0;
            long long deadline = it_now_ms() + IT_WAIT_MS;
            while (!it_poll_fd(evfd, 0)) {
                if (it_now_ms() > deadline)
                    IT_FAIL("round %d (%s): no connection event within %d ms", r, scenario_name(r),
                            IT_WAIT_MS);
                if (inflight < 8) {
                    size_t off = (size_t)(posted % (REGION / CHUNK)) * CHUNK;
                    if (rpma_write(conn, dst, off, mr, off, CHUNK, RPMA_F_COMPLETION_ALWAYS,
                                   NULL) != 0)
                        break; /* the connection is gone */
                    inflight++;
                    posted++;
                } else {
                    struct ibv_wc wc;
                    if (it_cq_next(cq, &wc, 100)) inflight--;
                }
            }
            printf("round %d: %d writes posted before the connection ended\n", r, posted);
            CHECK_OK(rpma_mr_remote_delete(&dst));
        }

        enum rpma_conn_event ev = it_next_event(conn);
        printf("round %d (%s): %s\n", r, scenario_name(r), rpma_utils_conn_event_2str(ev));
        if (ev != RPMA_CONN_CLOSED)
            IT_FAIL("round %d (%s): the server got %s (%d), expected RPMA_CONN_CLOSED", r,
                    scenario_name(r), rpma_utils_conn_event_2str(ev), (int)ev);
        if (!it_nic()) check_lost_lines(mark, r);
        (void)rpma_conn_disconnect(conn);
        CHECK_OK(rpma_conn_delete(&conn));
    }
    printf("server: %d rounds, every connection closed by a death logged with its real cause\n",
           rounds_n);

    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_mr_dereg(&rmr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(region);
    free(rbuf);
    CHECK_OK(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION));
}

/* ---- client: one child per round, which kills itself ---- */

static void child(const struct it_args *a, int round) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *region = it_alloc(REGION), *sbuf = it_alloc(MSG);
    struct rpma_mr_local *mr = NULL, *smr = NULL;
    CHECK_OK(
        rpma_mr_reg(peer, region, REGION, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_WRITE_SRC, &mr));
    CHECK_OK(rpma_mr_reg(peer, sbuf, MSG, RPMA_MR_USAGE_SEND, &smr));
    char desc[IT_MR_DESC_SIZE];
    CHECK_OK(rpma_mr_get_descriptor(mr, desc));
    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, desc, sizeof(desc));
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    CHECK_OK(rpma_send(conn, smr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_HELLO));
    it_cq_expect(cq, IBV_WC_SEND, (void *)WR_HELLO);

    if (round % 3 == 2) { /* keep writing into the server's region for a while */
        struct rpma_mr_remote *dst = it_remote_mr(conn, 0);
        long long end = it_now_ms() + 50;
        int inflight = 0, posted = 0;
        while (it_now_ms() < end) {
            if (inflight < 8) {
                size_t off = (size_t)(posted % (REGION / CHUNK)) * CHUNK;
                CHECK_OK(
                    rpma_write(conn, dst, off, mr, off, CHUNK, RPMA_F_COMPLETION_ALWAYS, NULL));
                inflight++;
                posted++;
            } else {
                struct ibv_wc wc;
                if (it_cq_next(cq, &wc, 100)) inflight--;
            }
        }
        /* dies with writes in flight */
    } else {
        usleep(50 * 1000);
    }
    fflush(stdout);
    kill(getpid(), SIGKILL);
    it_wait_for_death(5);
}

static void client(const struct it_args *a) {
    /* the parent never uses the library: each child starts it afresh */
    for (int r = 0; r < rounds_n; r++) {
        int pid = it_fork();
        if (pid == 0) {
            child(a, r);
            _exit(1);
        }
        it_wait_killed(pid);
    }
    printf("client: %d children killed mid-connection\n", rounds_n);
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    alarm(ALARM_S * it_time_scale()); /* the emulated guest runs slower */
    if (a.argc >= 1) rounds_n = atoi(a.argv[0]);
    CHECK(rounds_n > 0 && rounds_n <= 60);
    if (a.server)
        server(&a);
    else
        client(&a);
    return 0;
}
