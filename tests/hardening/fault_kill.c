/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_kill.c -- a peer SIGKILLed mid-stream, with operations in flight both ways.
 *
 * usage: fault_kill kill_server|kill_client PORT
 *
 * One process, the survivor, holds two connections: one to a victim and one to a healthy peer,
 * both its own children (forked before the library is used). In kill_server mode the children
 * are servers (PORT and PORT+1) and the survivor connects to them; in kill_client mode the
 * survivor listens on PORT and the children connect.
 *
 * The victim streams 1 MiB writes into the survivor's region without pause and never posts a
 * receive. The survivor posts, to the victim: receives, 1 MiB writes, a send (which can never
 * complete: no receive on the other side, so it and everything behind it stay outstanding),
 * more writes, a read and a flush. Then it SIGKILLs the victim and requires, within BOUND_MS of
 * the kill: CLOSED on that connection (the victim's kernel ends its streams: a disconnect, as
 * RDMA CM reports a dead process's; LOST would mean a broken network); every operation completing
 * exactly once, all those from the send on with an error and no success after an error. The
 * connection to the healthy peer must keep working (verified writes and reads, no event)
 * throughout.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define BOUND_MS 2000 /* stated bound: a dead process's sockets are closed by its kernel */
#define REGION (8u << 20)
#define CHUNK (1u << 20)
/* write sources live in the last MiB, which no peer writes into (TSan saw the overlap) */
#define SRC (7 * CHUNK)
#define ROLE_VICTIM 'V'
#define ROLE_HEALTHY 'H'
/* private data both ways: role, region descriptor, peer cfg descriptor */
#define PD_ROLE 0
#define PD_MR 1
#define PD_PCFG (1 + IT_MR_DESC_SIZE)
#define PD_RUN (PD_PCFG + IT_PCFG_DESC_SIZE) /* the survivor's pid: tells runs apart */
#define PD_LEN (PD_RUN + 4)

static const char *ADDR = "127.0.0.1";

struct side {
    struct rpma_peer *peer;
    char *buf;
    struct rpma_mr_local *mr;
    char pdata[PD_LEN];
};

static int32_t g_run; /* the survivor's pid */

static void side_init(struct side *s, bool server, char role) {
    s->peer = it_peer_new(ADDR, server);
    s->buf = it_alloc(REGION);
    int all = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC |
              RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_SEND |
              RPMA_MR_USAGE_RECV;
    CHECK_OK(rpma_mr_reg(s->peer, s->buf, REGION, all, &s->mr));
    s->pdata[PD_ROLE] = role;
    memcpy(s->pdata + PD_RUN, &g_run, 4);
    CHECK_OK(rpma_mr_get_descriptor(s->mr, s->pdata + PD_MR));
    struct rpma_peer_cfg *pcfg = NULL;
    CHECK_OK(rpma_peer_cfg_new(&pcfg));
    CHECK_OK(rpma_peer_cfg_get_descriptor(pcfg, s->pdata + PD_PCFG));
    CHECK_OK(rpma_peer_cfg_delete(&pcfg));
}

static struct rpma_conn_cfg *conn_cfg(void) {
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, 32));
    CHECK_OK(rpma_conn_cfg_set_rq_size(cfg, 8));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, 64));
    return cfg;
}

/* the port lies in the ephemeral range: an outgoing connection may hold it for a moment */
static struct rpma_ep *listen_retry(struct rpma_peer *peer, const char *port) {
    struct rpma_ep *ep = NULL;
    for (int i = 0;; i++) {
        int ret = rpma_ep_listen(peer, ADDR, port, &ep);
        if (ret == 0) return ep;
        if (i == 50) IT_FAIL("cannot listen on port %s: %s", port, rpma_err_2str(ret));
        usleep(100 * 1000);
    }
}

/*
 * the peer's data: its role byte and its region, on the request (server) or the conn (client),
 * each the whole field RDMA CM delivers
 */
static struct rpma_mr_remote *peer_region(const struct rpma_conn_private_data *pd, char *role) {
    CHECK(pd->ptr != NULL);
    CHECK(pd->len == IT_PDATA_CONNECT || pd->len == IT_PDATA_ACCEPT);
    *role = ((const char *)pd->ptr)[PD_ROLE];
    int32_t run = 0;
    memcpy(&run, (const char *)pd->ptr + PD_RUN, 4);
    if (run != g_run) IT_FAIL("a connection from another run (is a second instance on this port?)");
    struct rpma_mr_remote *mr = NULL;
    CHECK_OK(rpma_mr_remote_from_descriptor((const char *)pd->ptr + PD_MR, IT_MR_DESC_SIZE, &mr));
    return mr;
}

/* one signalled write+read round trip through conn, verified */
static void verified_io(struct rpma_conn *conn, struct side *s, struct rpma_mr_remote *dst,
                        uint64_t seed) {
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    size_t len = 64 * 1024, src = 5 * CHUNK, back = 5 * CHUNK + CHUNK / 2, roff = 2 * CHUNK;
    it_fill(s->buf + src, len, seed);
    memset(s->buf + back, 0, len);
    CHECK_OK(rpma_write(conn, dst, roff, s->mr, src, len, RPMA_F_COMPLETION_ALWAYS, (void *)71));
    it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)71);
    CHECK_OK(rpma_read(conn, s->mr, back, dst, roff, len, RPMA_F_COMPLETION_ALWAYS, (void *)72));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)72);
    long bad = it_verify(s->buf + back, len, seed);
    if (bad >= 0) IT_FAIL("healthy connection: read-back differs at %ld", bad);
}

static void expect_no_event(struct rpma_conn *conn) {
    int fd = -1;
    CHECK_OK(rpma_conn_get_event_fd(conn, &fd));
    int fl = fcntl(fd, F_GETFL);
    CHECK(fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0);
    enum rpma_conn_event ev;
    int ret = rpma_conn_next_event(conn, &ev);
    if (ret == 0) IT_FAIL("healthy connection got event %s", rpma_utils_conn_event_2str(ev));
    CHECK_EQ(ret, RPMA_E_NO_EVENT);
    CHECK(fcntl(fd, F_SETFL, fl) == 0);
}

/* ------------------------------------------------------------------ the children */

/* the victim writes into the survivor without pause until it is killed */
static void victim_stream(struct rpma_conn *conn, struct side *s, struct rpma_mr_remote *dst) {
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    it_fill(s->buf + SRC, CHUNK, 0x51c7);
    unsigned long n = 0;
    for (;;) {
        for (int k = 0; k < 4; k++, n++)
            if (rpma_write(conn, dst, (n % 4) * CHUNK, s->mr, SRC, CHUNK, RPMA_F_COMPLETION_ALWAYS,
                           NULL))
                it_wait_for_death(40);
        for (int k = 0; k < 4; k++) {
            struct ibv_wc wc;
            if (!it_cq_next(cq, &wc, IT_WAIT_MS) || wc.status != IBV_WC_SUCCESS)
                it_wait_for_death(40);
        }
    }
}

/* a child: its connection to the survivor, then its role's work */
static void child(char role, bool child_is_server, int port, int ready_fd, int go_fd) {
    struct side s;
    side_init(&s, child_is_server, role);
    struct rpma_conn_cfg *cfg = conn_cfg();
    struct rpma_conn *conn = NULL;
    struct rpma_mr_remote *dst = NULL;
    char prole = 0;
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    struct rpma_conn_private_data pd = {0};
    if (child_is_server) {
        struct rpma_ep *ep = listen_retry(s.peer, portstr);
        CHECK(write(ready_fd, "r", 1) == 1);
        struct rpma_conn_req *req = it_next_req(ep, cfg);
        CHECK_OK(rpma_conn_req_get_private_data(req, &pd));
        dst = peer_region(&pd, &prole);
        conn = it_accept(&req, s.pdata, PD_LEN);
        CHECK_OK(rpma_ep_shutdown(&ep));
    } else {
        char c;
        CHECK(read(go_fd, &c, 1) == 1); /* the survivor listens */
        conn = it_connect(s.peer, ADDR, portstr, cfg, s.pdata, PD_LEN);
        CHECK_OK(rpma_conn_get_private_data(conn, &pd));
        dst = peer_region(&pd, &prole);
    }
    if (role == ROLE_VICTIM) victim_stream(conn, &s, dst);
    /* healthy: the survivor does all the work; wait for its orderly disconnect */
    it_disconnect_passive(&conn, false);
    CHECK_OK(rpma_mr_remote_delete(&dst));
    CHECK_OK(rpma_mr_dereg(&s.mr));
    free(s.buf);
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_peer_delete(&s.peer));
    exit(0);
}

/* ------------------------------------------------------------------ the survivor */

#define N_RECV 4
#define N_WRITE_BEFORE 8
#define N_WRITE_AFTER 8
/* wr_ids in posting order: receives 1..4, writes 101.., send 200, writes 201.., read 300, flush 301
 */

static void survive(struct side *s, struct rpma_conn *victim, struct rpma_mr_remote *vdst,
                    int victim_pid, struct rpma_conn *healthy, struct rpma_mr_remote *hdst) {
    verified_io(healthy, s, hdst, 1);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(victim, &cq));

    /* what stays in flight: order matters, everything from the send on cannot complete */
    uint64_t order[64];
    int n = 0;
    /* the victim writes into [0, 4 MiB) of our region: receives and the send live above it */
    for (int i = 0; i < N_RECV; i++)
        CHECK_OK(
            rpma_recv(victim, s->mr, 6 * CHUNK + (size_t)i * 64, 64, (void *)(uintptr_t)(1 + i)));
    for (int i = 0; i < N_WRITE_BEFORE; i++) {
        CHECK_OK(rpma_write(victim, vdst, (size_t)(i % 4) * CHUNK, s->mr, SRC, CHUNK,
                            RPMA_F_COMPLETION_ALWAYS, (void *)(uintptr_t)(101 + i)));
        order[n++] = 101 + (uint64_t)i;
    }
    int first_stuck = n;
    CHECK_OK(rpma_send(victim, s->mr, 6 * CHUNK + 4096, 64, RPMA_F_COMPLETION_ALWAYS, (void *)200));
    order[n++] = 200;
    for (int i = 0; i < N_WRITE_AFTER; i++) {
        CHECK_OK(rpma_write(victim, vdst, (size_t)(i % 4) * CHUNK, s->mr, SRC, CHUNK,
                            RPMA_F_COMPLETION_ALWAYS, (void *)(uintptr_t)(201 + i)));
        order[n++] = 201 + (uint64_t)i;
    }
    CHECK_OK(
        rpma_read(victim, s->mr, 4 * CHUNK, vdst, 0, CHUNK, RPMA_F_COMPLETION_ALWAYS, (void *)300));
    order[n++] = 300;
    CHECK_OK(rpma_flush(victim, vdst, 0, CHUNK, RPMA_FLUSH_TYPE_VISIBILITY,
                        RPMA_F_COMPLETION_ALWAYS, (void *)301));
    order[n++] = 301;

    /* both directions busy for a moment, the healthy connection too */
    verified_io(healthy, s, hdst, 2);
    usleep(100 * 1000);

    printf("survivor: %d operations posted to the victim; killing it\n", n + N_RECV);
    long long t0 = it_now_ms();
    CHECK(kill(victim_pid, SIGKILL) == 0);
    enum rpma_conn_event ev = it_next_event(victim);
    long long t_ev = it_now_ms() - t0;
    if (ev != RPMA_CONN_CLOSED)
        IT_FAIL("event %s after the victim died, expected CLOSED", rpma_utils_conn_event_2str(ev));

    /* every operation completes exactly once; collect their statuses */
    int total = n + N_RECV, got = 0, status[64];
    uint64_t seen_id[64];
    long long deadline = t0 + BOUND_MS;
    while (got < total) {
        struct ibv_wc wc;
        long long left = deadline - it_now_ms();
        if (left <= 0 || !it_cq_next(cq, &wc, (int)left))
            IT_FAIL("only %d of %d operations completed within %d ms of the kill", got, total,
                    BOUND_MS);
        for (int k = 0; k < got; k++)
            if (seen_id[k] == wc.wr_id)
                IT_FAIL("wr_id %llu completed twice", (unsigned long long)wc.wr_id);
        seen_id[got] = wc.wr_id;
        status[got] = wc.status;
        got++;
    }
    long long t_last = it_now_ms() - t0;
    it_cq_expect_empty(cq);

    int ok = 0, failed = 0;
    bool error_seen = false;
    for (int k = 0; k < total; k++) {
        uint64_t id = k < N_RECV ? (uint64_t)(1 + k) : order[k - N_RECV];
        int st = -1;
        for (int j = 0; j < got; j++)
            if (seen_id[j] == id) st = status[j];
        if (st < 0) IT_FAIL("wr_id %llu never completed", (unsigned long long)id);
        if (k < N_RECV) {
            if (st == IBV_WC_SUCCESS) IT_FAIL("a receive completed although the victim never sent");
            failed++;
            continue;
        }
        int pos = k - N_RECV;
        if (st == IBV_WC_SUCCESS) {
            if (pos >= first_stuck)
                IT_FAIL("wr_id %llu succeeded although it was behind the stuck send",
                        (unsigned long long)id);
            if (error_seen)
                IT_FAIL("wr_id %llu succeeded after an earlier operation failed",
                        (unsigned long long)id);
            ok++;
        } else {
            error_seen = true;
            failed++;
        }
    }
    printf(
        "victim killed: %s after %lld ms, %d operations done (%d ok before the kill, %d failed) "
        "after %lld ms (bound %d ms)\n",
        rpma_utils_conn_event_2str(ev), t_ev, total, ok, failed, t_last, BOUND_MS);
    if (t_ev > BOUND_MS) IT_FAIL("the event took %lld ms", t_ev);

    (void)rpma_conn_disconnect(victim); /* the peer is gone: the result does not matter */
    CHECK_OK(rpma_conn_delete(&victim));
    CHECK_OK(rpma_mr_remote_delete(&vdst));

    /* the other connection of this process goes on working */
    for (uint64_t r = 0; r < 16; r++) verified_io(healthy, s, hdst, 100 + r);
    expect_no_event(healthy);
    it_disconnect_active(&healthy);
    CHECK_OK(rpma_mr_remote_delete(&hdst));
}

int main(int argc, char *argv[]) {
    alarm(IT_ALARM_S);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 3 || (strcmp(argv[1], "kill_server") && strcmp(argv[1], "kill_client"))) {
        fprintf(stderr, "usage: %s kill_server|kill_client PORT\n", argv[0]);
        return 2;
    }
    bool kill_server = strcmp(argv[1], "kill_server") == 0;
    int port = atoi(argv[2]);
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0);

    /* children first: nothing of the library may exist in a process that forks */
    g_run = (int32_t)getpid();
    int pids[2];
    char roles[2] = {ROLE_VICTIM, ROLE_HEALTHY};
    for (int i = 0; i < 2; i++) {
        pids[i] = it_fork();
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan outlives a failed survivor */
            if (getppid() != g_run) exit(1);
            close(ready[0]);
            close(go[1]);
            CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_ERROR));
            child(roles[i], kill_server, kill_server ? port + i : port, ready[1], go[0]);
        }
    }
    /* only the children write ready and read go: a dead child ends our wait instead of hanging */
    close(ready[1]);
    close(go[0]);
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_WARNING));
    struct side s;
    side_init(&s, !kill_server, 'S');
    struct rpma_conn_cfg *cfg = conn_cfg();
    struct rpma_conn *conns[2] = {NULL, NULL};
    struct rpma_mr_remote *dsts[2] = {NULL, NULL};
    if (kill_server) {
        for (int i = 0; i < 2; i++) {
            char c;
            CHECK(read(ready[0], &c, 1) == 1);
        }
        for (int i = 0; i < 2; i++) {
            char portstr[16], role;
            snprintf(portstr, sizeof(portstr), "%d", port + i);
            conns[i] = it_connect(s.peer, ADDR, portstr, cfg, s.pdata, PD_LEN);
            struct rpma_conn_private_data pd = {0};
            CHECK_OK(rpma_conn_get_private_data(conns[i], &pd));
            dsts[i] = peer_region(&pd, &role);
            CHECK_EQ(role, roles[i]);
        }
    } else {
        char portstr[16];
        snprintf(portstr, sizeof(portstr), "%d", port);
        struct rpma_ep *ep = listen_retry(s.peer, portstr);
        CHECK(write(go[1], "gg", 2) == 2);
        for (int k = 0; k < 2; k++) {
            struct rpma_conn_req *req = it_next_req(ep, cfg);
            struct rpma_conn_private_data pd = {0};
            CHECK_OK(rpma_conn_req_get_private_data(req, &pd));
            char role;
            struct rpma_mr_remote *mr = peer_region(&pd, &role);
            int i = role == ROLE_VICTIM ? 0 : 1;
            CHECK(conns[i] == NULL);
            dsts[i] = mr;
            conns[i] = it_accept(&req, s.pdata, PD_LEN);
        }
        CHECK_OK(rpma_ep_shutdown(&ep));
    }
    printf("survivor: connected to the victim and the healthy peer\n");
    survive(&s, conns[0], dsts[0], pids[0], conns[1], dsts[1]);
    it_wait_killed(pids[0]);
    int status = 0;
    CHECK(waitpid(pids[1], &status, 0) == pids[1]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) IT_FAIL("the healthy peer failed");
    CHECK_OK(rpma_mr_dereg(&s.mr));
    free(s.buf);
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_peer_delete(&s.peer));
    printf("fault_kill %s: PASS\n", argv[1]);
    return 0;
}
