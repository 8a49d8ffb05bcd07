/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * peer_killed.c -- one side is SIGKILLed while the other has operations outstanding: the
 * survivor gets RPMA_CONN_CLOSED, as on RDMA (the dying process's kernel disconnects it; LOST
 * would mean a broken network), and once it disconnects too, its outstanding receive and send
 * complete with an error status (rpma flushes them at the event already; the reference only when
 * the survivor's rdma_disconnect moves its QP to the error state), all within bounded time.
 *
 * Modes: kill_server (the client kills the server) and kill_client (the server kills the
 * client). The role that gets killed forks: its child does the work and dies, its parent only
 * checks that the child was killed. The victim's pid travels in the private data.
 *
 * The survivor prints how long after the kill its event came. With RPMA_PROVIDER=shm (where the
 * connection must run on shared memory) it fails past LOST_MAX_MS_SHM: the control socket's end
 * tells a side at once that its peer's process is gone (issue 11's target is 100 ms; the bound
 * is loose so that a loaded machine does not make it flaky).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define MSG 64
#define LOST_MAX_MS_SHM 1000

/* posts a receive and a send that cannot complete while the peer lives, kills it, checks */
static void survive(const char *role, struct rpma_peer *peer, struct rpma_conn *conn,
                    int32_t victim) {
    char *buf = it_alloc(2 * MSG);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, 2 * MSG, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &mr));
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    /* the peer never sends and never posts a receive: both stay outstanding */
    CHECK_OK(rpma_recv(conn, mr, 0, MSG, (void *)0xa1));
    CHECK_OK(rpma_send(conn, mr, MSG, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)0xa2));
    struct ibv_wc wc;
    CHECK(!it_cq_next(cq, &wc, 300)); /* nothing can complete yet */

    const char *provider = getenv("RPMA_PROVIDER");
    bool shm = provider && strcmp(provider, "shm") == 0;
    if (shm) CHECK_EQ(it_shm_mappings(), 1); /* the figure below is shm's */
    if (provider && strcmp(provider, "tcp") == 0) CHECK_EQ(it_shm_mappings(), 0);

    CHECK(victim > 1);
    long long t0 = it_now_us();
    CHECK(kill((pid_t)victim, SIGKILL) == 0);
    enum rpma_conn_event ev = it_next_event(conn);
    long long us = it_now_us() - t0;
    printf("%s: %s %.1f ms after the kill (provider %s)\n", role, rpma_utils_conn_event_2str(ev),
           us / 1000.0, provider ? provider : "auto");
    if (ev != RPMA_CONN_CLOSED)
        IT_FAIL("event %s after the peer died, expected CLOSED", rpma_utils_conn_event_2str(ev));
    if (shm && us > LOST_MAX_MS_SHM * 1000LL)
        IT_FAIL("on shm the event came %.1f ms after the kill, more than %d ms", us / 1000.0,
                LOST_MAX_MS_SHM);

    (void)rpma_conn_disconnect(conn); /* the peer is gone: the result does not matter */
    bool seen_recv = false, seen_send = false;
    for (int i = 0; i < 2; i++) {
        it_cq_get(cq, &wc);
        if (wc.status == IBV_WC_SUCCESS)
            IT_FAIL("wr_id %llu succeeded although the peer died", (unsigned long long)wc.wr_id);
        if (wc.wr_id == 0xa1 && !seen_recv)
            seen_recv = true;
        else if (wc.wr_id == 0xa2 && !seen_send)
            seen_send = true;
        else
            IT_FAIL("unexpected completion wr_id %llu", (unsigned long long)wc.wr_id);
    }
    it_cq_expect_empty(cq);
    CHECK_OK(rpma_conn_delete(&conn));
    CHECK_OK(rpma_mr_dereg(&mr));
    free(buf);
}

static void server(const struct it_args *a, bool kill_server) {
    int child = kill_server ? it_fork() : 0;
    if (child > 0) {
        it_wait_killed(child);
        return;
    }
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn_req *req = it_next_req(ep, NULL);
    if (kill_server) {
        int32_t pid = (int32_t)getpid();
        struct rpma_conn *conn = it_accept(&req, &pid, sizeof(pid));
        (void)conn;
        it_wait_for_death(40);
    }
    struct rpma_conn_private_data pd = {0};
    CHECK_OK(rpma_conn_req_get_private_data(req, &pd));
    CHECK_EQ(pd.len, IT_PDATA_CONNECT);
    int32_t victim = 0;
    memcpy(&victim, pd.ptr, sizeof(victim));
    struct rpma_conn *conn = it_accept(&req, NULL, 0);
    survive(a->server ? "server" : "client", peer, conn, victim);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_peer_delete(&peer));
}

static void client(const struct it_args *a, bool kill_server) {
    int child = kill_server ? 0 : it_fork();
    if (child > 0) {
        it_wait_killed(child);
        return;
    }
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    if (!kill_server) {
        int32_t pid = (int32_t)getpid();
        struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, &pid, sizeof(pid));
        (void)conn;
        it_wait_for_death(40);
    }
    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    struct rpma_conn_private_data pd = {0};
    CHECK_OK(rpma_conn_get_private_data(conn, &pd));
    CHECK_EQ(pd.len, IT_PDATA_ACCEPT);
    int32_t victim = 0;
    memcpy(&victim, pd.ptr, sizeof(victim));
    survive(a->server ? "server" : "client", peer, conn, victim);
    CHECK_OK(rpma_peer_delete(&peer));
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    if (a.argc < 1 || (strcmp(a.argv[0], "kill_server") && strcmp(a.argv[0], "kill_client")))
        IT_FAIL("mode kill_server or kill_client expected");
    bool kill_server = strcmp(a.argv[0], "kill_server") == 0;
    if (a.server)
        server(&a, kill_server);
    else
        client(&a, kill_server);
    return 0;
}
