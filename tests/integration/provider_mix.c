/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * provider_mix.c -- the two ends choose providers differently (RPMA_PROVIDER per role, set by
 * run_pair.sh from RPMA_IT_SERVER_ENV / RPMA_IT_CLIENT_ENV; issue 11): a connection falls back
 * to tcp where one side will not use shared memory, and one side that insists on it is refused
 * in bounded time.
 *
 * Modes (the role's RPMA_PROVIDER each expects; empty: unset, i.e. auto):
 *   auto         server auto, client auto: the connection moves to shm (both map its segment)
 *   tcp_server   server tcp (takes no offers), client auto: the client falls back to tcp and
 *                logs one INFO line saying why
 *   tcp_client   server auto, client tcp (makes no offer): the connection stays on tcp
 *   shm_refused  server tcp, client shm: the client's connect ends REJECTED or UNREACHABLE, fast;
 *                then the client, its RPMA_PROVIDER now tcp, connects again to tell the server
 *                it is done (that connection must work)
 * In every mode that connects, the client writes a pattern into the server's buffer, reads it
 * back, and disconnects; the server checks its buffer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define SIZE (128 * 1024)
#define SEED 0x3175
#define DONE_TAG "done"
/* far below the 30 s a silent server may take to answer: a refusal is no hang */
#define REFUSAL_MAX_MS 5000

enum mode { AUTO, TCP_SERVER, TCP_CLIENT, SHM_REFUSED };

static enum mode parse_mode(const char *m) {
    if (strcmp(m, "auto") == 0) return AUTO;
    if (strcmp(m, "tcp_server") == 0) return TCP_SERVER;
    if (strcmp(m, "tcp_client") == 0) return TCP_CLIENT;
    if (strcmp(m, "shm_refused") == 0) return SHM_REFUSED;
    IT_FAIL("mode auto, tcp_server, tcp_client or shm_refused expected, not %s", m);
}

/* the RPMA_PROVIDER this role must run with: the runner's per-role environment works */
static void expect_provider(const char *want) {
    const char *got = getenv("RPMA_PROVIDER");
    if (!got) got = "";
    if (strcmp(got, want) != 0)
        IT_FAIL("RPMA_PROVIDER='%s' in this role, expected '%s'", got, want);
}

/* whether a connection of this mode runs on shm */
static bool on_shm(enum mode m) {
    return m == AUTO;
}

/* the library's log: counts the INFO lines saying a connection stays on tcp, echoes warnings */
static atomic_int stays_on_tcp;

static void log_fn(enum rpma_log_level level, const char *file, const int line, const char *func,
                   const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (strstr(msg, "stays on tcp")) atomic_fetch_add(&stays_on_tcp, 1);
    if (level <= RPMA_LOG_LEVEL_WARNING || strstr(msg, "tcp") || strstr(msg, "shared memory"))
        fprintf(stderr, "[pid %d] librpma %d %s:%d %s: %s\n", (int)getpid(), (int)level, file, line,
                func, msg);
}

static void capture_log(void) {
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_INFO));
    CHECK_OK(rpma_log_set_function(log_fn));
}

static void server(const struct it_args *a, enum mode m) {
    expect_provider(m == TCP_CLIENT || m == AUTO ? "" : "tcp");
    capture_log();
    char *buf = it_alloc(SIZE);
    struct it_region_server srv;
    it_region_server_open(&srv, a, buf, SIZE, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC);

    /*
     * In shm_refused the client's shm attempt may reach us as a request (or not at all): we
     * turn it down, and wait for its tcp one, tagged done.
     */
    struct rpma_conn_req *req = NULL;
    for (int refusals = 0;; refusals++) {
        req = it_next_req(srv.ep, NULL);
        struct rpma_conn_private_data pd = {0};
        CHECK_OK(rpma_conn_req_get_private_data(req, &pd));
        bool done = pd.len >= sizeof(DONE_TAG) && memcmp(pd.ptr, DONE_TAG, sizeof(DONE_TAG)) == 0;
        if (done || m != SHM_REFUSED) {
            CHECK(done == (m == SHM_REFUSED));
            break;
        }
        CHECK(refusals < 3);
        printf("server: turning down a request without the done tag\n");
        CHECK_OK(rpma_conn_req_delete(&req));
    }
    struct rpma_conn *conn = it_accept(&req, srv.desc, sizeof(srv.desc));
    CHECK_EQ(it_shm_mappings(), on_shm(m) ? 1 : 0);
    it_disconnect_passive(&conn, false);
    CHECK_EQ(it_verify(buf, SIZE, SEED), -1);
    CHECK_EQ(it_shm_mappings(), 0); /* the connection's segment went with it */

    it_region_server_close(&srv);
    free(buf);
    printf("server: done (%s)\n", on_shm(m) ? "shm" : "tcp");
}

/* connects, writes the pattern into the server's buffer, reads it back, disconnects */
static void round_trip(const struct it_args *a, enum mode m, const void *pdata, size_t plen) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *src = it_alloc(SIZE), *dst = it_alloc(SIZE);
    it_fill(src, SIZE, SEED);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, src, SIZE, RPMA_MR_USAGE_WRITE_SRC, &mr));
    struct rpma_mr_local *dmr = NULL;
    CHECK_OK(rpma_mr_reg(peer, dst, SIZE, RPMA_MR_USAGE_READ_DST, &dmr));

    struct rpma_mr_remote *rmr = NULL;
    struct rpma_cq *cq = NULL;
    struct rpma_conn *conn = it_connect_region(peer, a, NULL, pdata, plen, &rmr, &cq);
    CHECK_EQ(it_shm_mappings(), on_shm(m) ? 1 : 0);
    CHECK_OK(rpma_write(conn, rmr, 0, mr, 0, SIZE, RPMA_F_COMPLETION_ALWAYS, (void *)0x1));
    it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)0x1);
    CHECK_OK(rpma_read(conn, dmr, 0, rmr, 0, SIZE, RPMA_F_COMPLETION_ALWAYS, (void *)0x2));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x2);
    CHECK_EQ(it_verify(dst, SIZE, SEED), -1);

    it_disconnect_region(&conn, &rmr);
    CHECK_EQ(it_shm_mappings(), 0);
    CHECK_OK(rpma_mr_dereg(&dmr));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(src);
    free(dst);
}

/* RPMA_PROVIDER=shm towards a server that keeps to tcp: refused, in bounded time */
static void refused(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    struct rpma_conn_req *req = NULL;
    CHECK_OK(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
    struct rpma_conn *conn = NULL;
    long long t0 = it_now_ms();
    CHECK_OK(rpma_conn_req_connect(&req, NULL, &conn));
    enum rpma_conn_event ev = it_next_event(conn);
    long long ms = it_now_ms() - t0;
    printf("client: RPMA_PROVIDER=shm towards a tcp-only server: %s after %lld ms\n",
           rpma_utils_conn_event_2str(ev), ms);
    if (ev != RPMA_CONN_REJECTED && ev != RPMA_CONN_UNREACHABLE)
        IT_FAIL("event %s, expected REJECTED or UNREACHABLE", rpma_utils_conn_event_2str(ev));
    if (ms > REFUSAL_MAX_MS) IT_FAIL("the refusal took %lld ms", ms);
    CHECK_EQ(it_shm_mappings(), 0);
    CHECK_OK(rpma_conn_delete(&conn));
    CHECK_OK(rpma_peer_delete(&peer));
}

static void client(const struct it_args *a, enum mode m) {
    if (m == SHM_REFUSED) {
        expect_provider("shm");
        /* the refused attempt in a child, so this process starts the library afresh as tcp */
        int child = it_fork();
        if (child == 0) {
            refused(a);
            exit(0);
        }
        int status = 0;
        while (waitpid(child, &status, 0) < 0) CHECK(errno == EINTR);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            IT_FAIL("the refused connect's process ended with status 0x%x", status);
        CHECK(setenv("RPMA_PROVIDER", "tcp", 1) == 0);
        round_trip(a, m, DONE_TAG, sizeof(DONE_TAG));
        return;
    }
    expect_provider(m == TCP_CLIENT ? "tcp" : "");
    capture_log();
    round_trip(a, m, NULL, 0);
    /* one INFO line saying why, where this side offered and the server did not take it */
    int lines = atomic_load(&stays_on_tcp);
    if (lines != (m == TCP_SERVER ? 1 : 0))
        IT_FAIL("%d log lines saying the connection stays on tcp, expected %d", lines,
                m == TCP_SERVER ? 1 : 0);
    printf("client: done (%s)\n", on_shm(m) ? "shm" : "tcp");
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    if (a.argc < 1) IT_FAIL("a mode expected");
    enum mode m = parse_mode(a.argv[0]);
    if (a.server)
        server(&a, m);
    else
        client(&a, m);
    return 0;
}
