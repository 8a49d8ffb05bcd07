/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * netfault.c -- roles for the network-fault tests that netns.sh runs inside two network
 * namespaces it creates (and for the closed-port test on loopback).
 *
 *   netfault server ADDR PORT TFILE          serves one connection, posts a receive, then needs
 *                                            LOST within the dead-peer bound of the cut
 *   netfault client ADDR PORT TFILE CUTCMD   connects, verified I/O, runs CUTCMD (the network cut),
 *                                            writes the cut time to TFILE, posts operations that
 *                                            cannot complete, then needs LOST and every one of
 *                                            them failed within the bound
 *   netfault rejected ADDR PORT              nobody listens: REJECTED within REJECT_MS
 *   netfault unreachable ADDR PORT MS        nobody answers: UNREACHABLE within MS + SLACK_MS, and
 *                                            not much before MS
 *
 * The bound for the cut is RPMA_DEAD_PEER_TIMEOUT_MS (the test sets 2000) + SLACK_MS; a lower
 * bound of half the timeout shows that the dead-peer machinery, not something else, ended it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define SLACK_MS 1500
#define REJECT_MS 500
#define REGION (1u << 20)
#define PD_LEN (IT_MR_DESC_SIZE + IT_PCFG_DESC_SIZE)

static int dead_peer_ms(void) {
    const char *e = getenv("RPMA_DEAD_PEER_TIMEOUT_MS");
    if (!e) IT_FAIL("RPMA_DEAD_PEER_TIMEOUT_MS must be set");
    return atoi(e);
}

static struct rpma_mr_local *reg(struct rpma_peer *peer, char **buf) {
    *buf = it_alloc(REGION);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, *buf, REGION,
                         RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC |
                             RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
                             RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_SEND,
                         &mr));
    return mr;
}

/* the next event within ms, and when it came */
static enum rpma_conn_event event_within(struct rpma_conn *conn, int ms, long long *when) {
    int fd = -1;
    CHECK_OK(rpma_conn_get_event_fd(conn, &fd));
    if (!it_poll_fd(fd, ms)) IT_FAIL("no connection event within %d ms", ms);
    *when = it_now_ms();
    enum rpma_conn_event ev;
    CHECK_OK(rpma_conn_next_event(conn, &ev));
    return ev;
}

static long long read_cut_time(const char *tfile) {
    long long deadline = it_now_ms() + 10000;
    while (it_now_ms() < deadline) {
        FILE *f = fopen(tfile, "r");
        long long t = 0;
        if (f) {
            int n = fscanf(f, "%lld", &t);
            fclose(f);
            if (n == 1 && t > 0) return t;
        }
        usleep(20 * 1000);
    }
    IT_FAIL("the client never wrote the cut time to %s", tfile);
}

static void check_delay(const char *who, long long delay, int timeout) {
    printf("%s: LOST %lld ms after the cut (dead-peer timeout %d ms, bound %d ms)\n", who, delay,
           timeout, timeout + SLACK_MS);
    if (delay > timeout + SLACK_MS) IT_FAIL("%s: detected too late", who);
    if (delay < timeout / 2) IT_FAIL("%s: LOST before the dead-peer timeout could expire", who);
}

static void server(const char *addr, const char *port, const char *tfile) {
    int timeout = dead_peer_ms();
    struct rpma_peer *peer = it_peer_new(addr, true);
    char *buf;
    struct rpma_mr_local *mr = reg(peer, &buf);
    char pdata[PD_LEN];
    CHECK_OK(rpma_mr_get_descriptor(mr, pdata));
    struct rpma_peer_cfg *pcfg = NULL;
    CHECK_OK(rpma_peer_cfg_new(&pcfg));
    CHECK_OK(rpma_peer_cfg_get_descriptor(pcfg, pdata + IT_MR_DESC_SIZE));
    CHECK_OK(rpma_peer_cfg_delete(&pcfg));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, addr, port, &ep));
    it_ready();
    struct rpma_conn_req *req = it_next_req(ep, NULL);
    /* outstanding until the end: the client never sends */
    CHECK_OK(rpma_conn_req_recv(req, mr, REGION - 64, 64, (void *)0x77));
    struct rpma_conn *conn = it_accept(&req, pdata, sizeof(pdata));
    /* idle from here on: only keepalives can tell that the client is gone */
    long long t_lost = 0;
    enum rpma_conn_event ev = event_within(conn, 30000, &t_lost);
    if (ev != RPMA_CONN_LOST)
        IT_FAIL("server: event %s, expected LOST", rpma_utils_conn_event_2str(ev));
    check_delay("server (idle)", t_lost - read_cut_time(tfile), timeout);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    struct ibv_wc wc;
    it_cq_get(cq, &wc);
    CHECK_EQ(wc.wr_id, 0x77);
    if (wc.status == IBV_WC_SUCCESS) IT_FAIL("server: the receive succeeded");
    it_cq_expect_empty(cq);
    (void)rpma_conn_disconnect(conn);
    CHECK_OK(rpma_conn_delete(&conn));
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
}

static void client(const char *addr, const char *port, const char *tfile, const char *cutcmd) {
    int timeout = dead_peer_ms();
    struct rpma_peer *peer = it_peer_new(addr, false);
    char *buf;
    struct rpma_mr_local *mr = reg(peer, &buf);
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, 16));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, 32));
    struct rpma_conn *conn = it_connect(peer, addr, port, cfg, NULL, 0);
    struct rpma_mr_remote *dst = it_remote_mr(conn, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    /* the path works before the cut */
    it_fill(buf, 4096, 42);
    CHECK_OK(rpma_write(conn, dst, 0, mr, 0, 4096, RPMA_F_COMPLETION_ALWAYS, (void *)1));
    it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)1);
    CHECK_OK(rpma_read(conn, mr, 8192, dst, 0, 4096, RPMA_F_COMPLETION_ALWAYS, (void *)2));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)2);
    CHECK(it_verify(buf + 8192, 4096, 42) < 0);

    long long t_cut = it_now_ms();
    int rc = system(cutcmd);
    if (rc != 0) IT_FAIL("the cut command '%s' failed (%d)", cutcmd, rc);
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", tfile);
    FILE *f = fopen(tmp, "w");
    CHECK(f != NULL);
    fprintf(f, "%lld\n", t_cut);
    CHECK(fclose(f) == 0);
    CHECK(rename(tmp, tfile) == 0);
    printf("client: network cut in %lld ms\n", it_now_ms() - t_cut);

    /* nothing of this can be acknowledged any more */
    for (int i = 0; i < 4; i++)
        CHECK_OK(rpma_write(conn, dst, (size_t)i * 65536, mr, 0, 65536, RPMA_F_COMPLETION_ALWAYS,
                            (void *)(uintptr_t)(10 + i)));
    CHECK_OK(rpma_read(conn, mr, 512 * 1024, dst, 0, 4096, RPMA_F_COMPLETION_ALWAYS, (void *)20));
    CHECK_OK(rpma_flush(conn, dst, 0, 4096, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS,
                        (void *)21));
    long long t_lost = 0;
    enum rpma_conn_event ev = event_within(conn, 30000, &t_lost);
    if (ev != RPMA_CONN_LOST)
        IT_FAIL("client: event %s, expected LOST", rpma_utils_conn_event_2str(ev));
    check_delay("client (6 operations outstanding)", t_lost - t_cut, timeout);
    for (int i = 0; i < 6; i++) {
        struct ibv_wc wc;
        if (!it_cq_next(cq, &wc, 1000)) IT_FAIL("client: only %d of 6 operations completed", i);
        if (wc.status == IBV_WC_SUCCESS)
            IT_FAIL("client: wr_id %llu succeeded across the cut", (unsigned long long)wc.wr_id);
    }
    it_cq_expect_empty(cq);
    printf("client: all 6 outstanding operations failed %lld ms after the cut\n",
           it_now_ms() - t_cut);
    (void)rpma_conn_disconnect(conn);
    CHECK_OK(rpma_conn_delete(&conn));
    CHECK_OK(rpma_mr_remote_delete(&dst));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
}

/* a connection attempt that must end with `expected` within [min_ms, max_ms] */
static void attempt(const char *addr, const char *port, int timeout_ms,
                    enum rpma_conn_event expected, long long min_ms, long long max_ms) {
    struct rpma_peer *peer = it_peer_new(addr, false);
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_timeout(cfg, timeout_ms));
    long long t0 = it_now_ms();
    struct rpma_conn_req *req = NULL;
    CHECK_OK(rpma_conn_req_new(peer, addr, port, cfg, &req));
    struct rpma_conn *conn = NULL;
    CHECK_OK(rpma_conn_req_connect(&req, NULL, &conn));
    long long when = 0;
    enum rpma_conn_event ev = event_within(conn, (int)max_ms + 5000, &when);
    long long took = when - t0;
    printf("%s:%s: %s after %lld ms (conn cfg timeout %d ms, expected %lld..%lld ms)\n", addr, port,
           rpma_utils_conn_event_2str(ev), took, timeout_ms, min_ms, max_ms);
    if (ev != expected)
        IT_FAIL("event %s, expected %s", rpma_utils_conn_event_2str(ev),
                rpma_utils_conn_event_2str(expected));
    if (took > max_ms || took < min_ms) IT_FAIL("took %lld ms", took);
    CHECK_OK(rpma_conn_delete(&conn));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_peer_delete(&peer));
}

int main(int argc, char *argv[]) {
    alarm(IT_ALARM_S);
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_WARNING));
    if (argc == 5 && strcmp(argv[1], "server") == 0)
        server(argv[2], argv[3], argv[4]);
    else if (argc == 6 && strcmp(argv[1], "client") == 0)
        client(argv[2], argv[3], argv[4], argv[5]);
    else if (argc == 4 && strcmp(argv[1], "rejected") == 0)
        attempt(argv[2], argv[3], 1000, RPMA_CONN_REJECTED, 0, REJECT_MS);
    else if (argc == 5 && strcmp(argv[1], "unreachable") == 0) {
        int ms = atoi(argv[4]);
        attempt(argv[2], argv[3], ms, RPMA_CONN_UNREACHABLE, ms - 100, ms + SLACK_MS);
    } else {
        fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
        return 2;
    }
    printf("netfault %s: PASS\n", argv[1]);
    return 0;
}
