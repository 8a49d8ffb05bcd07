/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * conn.c -- connection set-up and teardown between two processes.
 *
 * Modes (the argument after PORT):
 *   client_disc  private data both ways (56 B on connect, 196 B on accept); client disconnects
 *   server_disc  the same, but the server disconnects
 *   reject       the server rejects the first request (client sees REJECTED), accepts the second
 *   nolistener   client only, nobody listens: REJECTED or UNREACHABLE
 *   late_event   as client_disc, and then each side, its connection closed and disconnected, waits
 *                a while for its event fd: on RDMA it becomes readable once more (rdma_cm's
 *                TIMEWAIT_EXIT), and the call it wakes must return at once, with CLOSED again
 *                (the reference) or RPMA_E_NO_EVENT (rpma: one CLOSED per connection), and
 *                leave the fd unreadable; it hung on rpma's verbs provider, which dropped the
 *                event and read on. On tcp and shm nothing comes: the fd must stay unreadable
 *   early_post   as client_disc, but the client posts once its event fd is readable and before it
 *                reads ESTABLISHED: RPMA_E_PROVIDER, as the queue pair of an RDMA client is
 *                ready to send only once librdmacm has handled the server's answer, which it does
 *                as the event is read (tcp took the post whenever its Reply had come first);
 *                after ESTABLISHED the same post completes, and nothing refused ever runs. The
 *                reference over rxe refuses the post but may run it once ESTABLISHED is read (rxe
 *                queues the request before the kernel refuses it): its completion is taken if it
 *                comes there, and the send, which would wait for a receive, is left out
 *   notice       as client_disc, with the threshold at NOTICE: rpma_ep_listen, rpma_conn_req_new,
 *                each side's ESTABLISHED and rpma_conn_disconnect each log at NOTICE, as
 *                rpma_log_set_threshold(3) gives "connection established" as NOTICE's example
 *                (only that a NOTICE line came is checked, not its words)
 *   cq_zero      client only: a request with a CQ of 0 entries fails (RPMA_E_PROVIDER), as
 *                ibv_create_cq(3) refuses one; and a request to the wildcard address 0.0.0.0
 *                fails the same way, as RDMA CM resolves no route to it; nothing needs to listen
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define CONNECT_PDATA 56
#define ACCEPT_PDATA 196
#define SEED_CLIENT 0xc11e
#define SEED_SERVER 0x5e7e

static void check_pdata(const struct rpma_conn_private_data *pd, size_t len, uint64_t seed) {
    CHECK(pd->ptr != NULL);
    CHECK_EQ(pd->len, len);
    long bad = it_verify(pd->ptr, len, seed);
    if (bad >= 0) IT_FAIL("private data differs at byte %ld", bad);
}

static void check_conn_usable(struct rpma_conn *conn) {
    struct rpma_cq *cq = NULL, *rcq = (struct rpma_cq *)1;
    uint32_t qp_num = 0;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    CHECK(cq != NULL);
    CHECK_OK(rpma_conn_get_rcq(conn, &rcq));
    CHECK(rcq == NULL); /* default cfg: no RCQ */
    CHECK_OK(rpma_conn_get_qp_num(conn, &qp_num));
    it_cq_expect_empty(cq);
}

/* notice: the NOTICE lines logged so far (the engine's threads may log too) */
static atomic_int g_notices;

static void count_notice(enum rpma_log_level level, const char *file, const int line,
                         const char *func, const char *fmt, ...) {
    if (level == RPMA_LOG_LEVEL_NOTICE) atomic_fetch_add(&g_notices, 1);
    if (level > RPMA_LOG_LEVEL_WARNING) return;
    char msg[512]; /* errors and warnings still reach the test's log */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[pid %d] librpma %s:%d %s(): %s\n", (int)getpid(), file, line, func, msg);
}

static void log_notices(const char *mode) {
    if (strcmp(mode, "notice") != 0) return;
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_NOTICE));
    CHECK_OK(rpma_log_set_function(count_notice));
}

/* fails unless a NOTICE line came since before (mode notice only) */
static void expect_noticed(const char *mode, int before, const char *what) {
    if (strcmp(mode, "notice") == 0 && atomic_load(&g_notices) == before)
        IT_FAIL("%s logged nothing at NOTICE", what);
}

/* it_connect, checking each step's NOTICE line (notice) */
static struct rpma_conn *connect_noticed(struct rpma_peer *peer, const struct it_args *a,
                                         const struct rpma_conn_private_data *pd) {
    struct rpma_conn_req *req = NULL;
    struct rpma_conn *conn = NULL;
    int n = atomic_load(&g_notices);
    CHECK_OK(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
    expect_noticed("notice", n, "rpma_conn_req_new");
    CHECK_OK(rpma_conn_req_connect(&req, pd, &conn));
    n = atomic_load(&g_notices);
    it_expect_event(conn, RPMA_CONN_ESTABLISHED);
    expect_noticed("notice", n, "the client's ESTABLISHED");
    return conn;
}

/* it_connect, posting before ESTABLISHED is read (early_post) */
static struct rpma_conn *connect_posting_early(struct rpma_peer *peer, const struct it_args *a,
                                               const struct rpma_conn_private_data *pd) {
    struct rpma_conn_req *req = NULL;
    struct rpma_conn *conn = NULL;
    CHECK_OK(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
    CHECK_OK(rpma_conn_req_connect(&req, pd, &conn));
    int fd = -1;
    CHECK_OK(rpma_conn_get_event_fd(conn, &fd));
    if (!it_poll_fd(fd, IT_WAIT_MS)) IT_FAIL("no connection event within %d ms", IT_WAIT_MS);
    const int f = RPMA_F_COMPLETION_ALWAYS;
    CHECK_ERR(rpma_write(conn, NULL, 0, NULL, 0, 0, f, (void *)0xe0), RPMA_E_PROVIDER);
    if (!it_reference()) CHECK_ERR(rpma_send(conn, NULL, 0, 0, f, (void *)0xe1), RPMA_E_PROVIDER);
    it_expect_event(conn, RPMA_CONN_ESTABLISHED);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    CHECK_OK(rpma_write(conn, NULL, 0, NULL, 0, 0, f, (void *)0xea));
    struct ibv_wc wc;
    it_cq_get(cq, &wc);
    if (it_reference() && wc.wr_id == 0xe0) it_cq_get(cq, &wc); /* rxe ran the refused write */
    if (wc.wr_id != 0xea || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RDMA_WRITE)
        IT_FAIL("completion wr_id 0x%llx (%s), expected the write 0xea",
                (unsigned long long)wc.wr_id, it_wc_status_str(wc.status));
    return conn;
}

/* the connection is closed and this side has disconnected: a late event must not block */
static void late_event(struct rpma_conn **conn) {
    int fd = -1;
    CHECK_OK(rpma_conn_get_event_fd(*conn, &fd));
    bool late = it_poll_fd(fd, it_nic() ? IT_WAIT_MS : 200);
    if (late && !it_nic()) /* tcp and shm give one CLOSED and nothing after it */
        IT_FAIL("the event fd is readable after CLOSED: a program polling it would spin");
    if (late) {
        printf("a late event: rpma_conn_next_event must return at once\n");
        fflush(stdout);
        alarm((unsigned)(10 * it_time_scale())); /* a blocked call ends the process */
        enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
        int ret = rpma_conn_next_event(*conn, &ev);
        alarm(IT_ALARM_S);
        if (ret == 0 && ev != RPMA_CONN_CLOSED)
            IT_FAIL("late event %s, expected CLOSED", rpma_utils_conn_event_2str(ev));
        if (ret != 0 && ret != RPMA_E_NO_EVENT)
            IT_FAIL("rpma_conn_next_event returned %d (%s)", ret, rpma_err_2str(ret));
        if (it_poll_fd(fd, 0)) IT_FAIL("the event fd is still readable after the late event");
    }
    CHECK_OK(rpma_conn_delete(conn));
}

static void server(const struct it_args *a, const char *mode) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    struct rpma_ep *ep = NULL;
    log_notices(mode);
    int n = atomic_load(&g_notices);
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    expect_noticed(mode, n, "rpma_ep_listen");
    it_ready();

    struct rpma_conn_private_data pd = {0};
    struct rpma_conn_req *req = it_next_req(ep, NULL);
    CHECK_OK(rpma_conn_req_get_private_data(req, &pd));
    check_pdata(&pd, CONNECT_PDATA, SEED_CLIENT);

    if (strcmp(mode, "reject") == 0) {
        CHECK_OK(rpma_conn_req_delete(&req));
        CHECK(req == NULL);
        /* the listener keeps working: the client's second attempt is accepted */
        req = it_next_req(ep, NULL);
    }

    char spd[ACCEPT_PDATA];
    it_fill(spd, sizeof(spd), SEED_SERVER);
    n = atomic_load(&g_notices);
    struct rpma_conn *conn = it_accept(&req, spd, sizeof(spd));
    expect_noticed(mode, n, "the server's ESTABLISHED");
    /* the client's private data moved from the request to the connection */
    memset(&pd, 0, sizeof(pd));
    CHECK_OK(rpma_conn_get_private_data(conn, &pd));
    check_pdata(&pd, CONNECT_PDATA, SEED_CLIENT);
    check_conn_usable(conn);

    if (strcmp(mode, "server_disc") == 0) {
        it_disconnect_active(&conn);
    } else if (strcmp(mode, "late_event") == 0) {
        it_expect_event(conn, RPMA_CONN_CLOSED);
        CHECK_OK(rpma_conn_disconnect(conn));
        late_event(&conn);
    } else {
        it_disconnect_passive(&conn, false);
    }

    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK(ep == NULL);
    CHECK_OK(rpma_peer_delete(&peer));
    CHECK(peer == NULL);
}

static void client(const struct it_args *a, const char *mode) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char cpd[CONNECT_PDATA];
    it_fill(cpd, sizeof(cpd), SEED_CLIENT);
    struct rpma_conn_private_data pd = {.ptr = cpd, .len = sizeof(cpd)};

    if (strcmp(mode, "cq_zero") == 0) {
        struct rpma_conn_cfg *cfg = NULL;
        CHECK_OK(rpma_conn_cfg_new(&cfg));
        CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, 0));
        struct rpma_conn_req *req = NULL;
        CHECK_ERR(rpma_conn_req_new(peer, a->addr, a->port, cfg, &req), RPMA_E_PROVIDER);
        CHECK(req == NULL);
        CHECK_ERR(rpma_conn_req_new(peer, "0.0.0.0", a->port, NULL, &req), RPMA_E_PROVIDER);
        CHECK(req == NULL);
        CHECK_OK(rpma_conn_cfg_delete(&cfg));
        CHECK_OK(rpma_peer_delete(&peer));
        return;
    }

    if (strcmp(mode, "reject") == 0 || strcmp(mode, "nolistener") == 0) {
        struct rpma_conn_req *req = NULL;
        struct rpma_conn *conn = NULL;
        CHECK_OK(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
        CHECK_OK(rpma_conn_req_connect(&req, &pd, &conn));
        CHECK(req == NULL);
        enum rpma_conn_event ev = it_next_event(conn);
        if (strcmp(mode, "reject") == 0)
            CHECK_EQ(ev, RPMA_CONN_REJECTED);
        else if (ev != RPMA_CONN_REJECTED && ev != RPMA_CONN_UNREACHABLE)
            IT_FAIL("event %s, expected REJECTED or UNREACHABLE", rpma_utils_conn_event_2str(ev));
        CHECK_OK(rpma_conn_delete(&conn));
        CHECK(conn == NULL);
        if (strcmp(mode, "nolistener") == 0) {
            CHECK_OK(rpma_peer_delete(&peer));
            return;
        }
    }

    log_notices(mode);
    struct rpma_conn *conn = NULL;
    if (strcmp(mode, "early_post") == 0)
        conn = connect_posting_early(peer, a, &pd);
    else if (strcmp(mode, "notice") == 0)
        conn = connect_noticed(peer, a, &pd);
    else
        conn = it_connect(peer, a->addr, a->port, NULL, cpd, sizeof(cpd));
    struct rpma_conn_private_data spd = {0};
    CHECK_OK(rpma_conn_get_private_data(conn, &spd));
    check_pdata(&spd, ACCEPT_PDATA, SEED_SERVER);
    check_conn_usable(conn);

    if (strcmp(mode, "server_disc") == 0) {
        it_disconnect_passive(&conn, false);
    } else if (strcmp(mode, "late_event") == 0) {
        CHECK_OK(rpma_conn_disconnect(conn));
        it_expect_event(conn, RPMA_CONN_CLOSED);
        late_event(&conn);
    } else if (strcmp(mode, "notice") == 0) {
        int n = atomic_load(&g_notices);
        CHECK_OK(rpma_conn_disconnect(conn));
        expect_noticed(mode, n, "rpma_conn_disconnect");
        it_expect_event(conn, RPMA_CONN_CLOSED);
        CHECK_OK(rpma_conn_delete(&conn));
    } else {
        it_disconnect_active(&conn);
    }

    CHECK_OK(rpma_peer_delete(&peer));
    CHECK(peer == NULL);
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    if (a.argc < 1) IT_FAIL("mode argument missing");
    const char *mode = a.argv[0];
    if (strcmp(mode, "client_disc") && strcmp(mode, "server_disc") && strcmp(mode, "reject") &&
        strcmp(mode, "nolistener") && strcmp(mode, "cq_zero") && strcmp(mode, "late_event") &&
        strcmp(mode, "early_post") && strcmp(mode, "notice"))
        IT_FAIL("unknown mode %s", mode);
    if (a.server)
        server(&a, mode);
    else
        client(&a, mode);
    return 0;
}
