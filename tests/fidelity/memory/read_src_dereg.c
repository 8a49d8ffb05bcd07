/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * read_src_dereg.c -- reads in flight when the target deregisters their READ_SRC region.
 *
 * usage: read_src_dereg PORT natural|stalled
 *
 * Three rounds, each on a fresh connection and registration. The client posts 32 signaled 2 MiB
 * reads of the server's region and says so; the server at once deregisters the region:
 *   natural  while the answers stream out; round 1 is held instead, so that it is conclusive on
 *            any transport (rxe answers a whole post at once): a send goes first, and the
 *            server posts its receive only after the dereg. RC executes in order and a send
 *            waits for its receive (infinite RNR retry), so every read finds a dead region: the
 *            send completes SUCCESS, no read does;
 *   stalled  with the client process stopped (SIGSTOP) for 100 ms before the dereg, so that
 *            answers sit queued at the server behind a full socket, and resumed right after.
 *            A send goes first here too, and the server posts its receive only once the client
 *            has stopped: no answer can leave before the stop, so every round is conclusive
 *            however fast the transport drains (shm once answered all 64 MiB before the stop).
 * As on a NIC, which stops reading a region once it is deregistered:
 *   - every read completes within 1 s of the dereg: SUCCESS only with all of its data (checked
 *     against the pattern), otherwise IBV_WC_REM_ACCESS_ERR (at most one) or
 *     IBV_WC_WR_FLUSH_ERR (the connection may end LOST if an answer was cut mid-payload); no
 *     SUCCESS follows an error;
 *   - rpma_mr_dereg itself returns within 1 s.
 * (A held round's reads resume when the sender's RNR timer fires, which the 1 s bound does not
 * cover: the bound applies to racing rounds.)
 * The server (parent) sends the time the dereg returned (CLOCK_MONOTONIC, shared by both
 * processes); the client (child) times each completion. The server application leaves the
 * connection alone until the client has all its completions: the library itself must end the
 * reads (NAK, or a connection it closes), not wait until the application deletes the connection.
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "mem_common.h"

#define CHUNK (2u << 20)
#define NR 32
#define LEN ((size_t)NR * CHUNK)
#define ROUNDS 3
#define SEED_A 0xa4000
#define BOUND_MS 1000
#define WR_HOLD 999
#define HLEN 8

static const char *g_port;
static bool g_stalled;

static void client(int ctl, void *arg) {
    (void)arg;
    char msg[MT_MSG];
    mt_expect(ctl, "READY", msg, 20000);
    struct rpma_peer *peer = it_peer_new(MT_ADDR, false);
    char *dst = it_alloc(LEN);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, dst, LEN, RPMA_MR_USAGE_READ_DST, &mr));
    struct rpma_conn_cfg *cfg = mt_cfg(NR + 1);
    char *hbuf = it_alloc(HLEN);
    struct rpma_mr_local *mr_h = NULL;
    CHECK_OK(rpma_mr_reg(peer, hbuf, HLEN, RPMA_MR_USAGE_SEND, &mr_h));
    int failures = 0, conclusive = 0;
    for (int round = 0; round < ROUNDS; round++) {
        memset(dst, 0, LEN);
        struct rpma_conn *conn = it_connect(peer, MT_ADDR, g_port, cfg, NULL, 0);
        struct rpma_mr_remote *remote = it_remote_mr(conn, 0);
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conn, &cq));
        bool held = !g_stalled && round == 1;
        bool gated = held || g_stalled; /* a send first: the reads wait behind it */
        if (gated)
            CHECK_OK(rpma_send(conn, mr_h, 0, HLEN, RPMA_F_COMPLETION_ALWAYS, (void *)WR_HOLD));
        for (int k = 0; k < NR; k++)
            CHECK_OK(rpma_read(conn, mr, (size_t)k * CHUNK, remote, (size_t)k * CHUNK, CHUNK,
                               RPMA_F_COMPLETION_ALWAYS, (void *)(uintptr_t)k));
        mt_say(ctl, "POSTED");
        long long t_dereg = 0, dereg_ms = 0;
        const char *d = mt_expect(ctl, "DEREG", msg, 15000);
        if (sscanf(d, "%lld %lld", &t_dereg, &dereg_ms) != 2) IT_FAIL("bad message '%s'", d);
        int status[NR], hold_st = -1;
        long long at[NR], last = 0;
        for (int k = 0; k < NR; k++) status[k] = -1;
        /* a generous wait, to tell how late a late completion is */
        long long give_up = t_dereg + BOUND_MS + 9000;
        for (int got = 0; got < NR + gated; got++) {
            struct ibv_wc wc;
            long long left = give_up - it_now_ms();
            if (!it_cq_next(cq, &wc, left > 0 ? (int)left : 0))
                IT_FAIL(
                    "round %d: %d of %d reads still without a completion %lld ms after the "
                    "dereg",
                    round, NR - got, NR, it_now_ms() - t_dereg);
            long long t = it_now_ms();
            if (gated && wc.wr_id == WR_HOLD && hold_st == -1) {
                hold_st = (int)wc.status;
                continue;
            }
            if (wc.wr_id >= NR || status[wc.wr_id] != -1)
                IT_FAIL("round %d: unexpected completion wr_id %llu", round,
                        (unsigned long long)wc.wr_id);
            status[wc.wr_id] = (int)wc.status;
            at[wc.wr_id] = t;
            if (t > last) last = t;
        }
        mt_say(ctl, "DONE");
        enum rpma_conn_event ev = mt_close(&conn, 15000);
        CHECK_OK(rpma_mr_remote_delete(&remote));

        int rf = 0;
        struct mt_tally t;
        mt_tally_init(&t, IBV_WC_REM_ACCESS_ERR, 'A');
        char what[64];
        for (int k = 0; k < NR; k++) {
            enum ibv_wc_status st = (enum ibv_wc_status)status[k];
            snprintf(what, sizeof(what), "round %d: read %d", round, k);
            if (mt_tally_add(&t, k, st, what)) {
                long bad = it_verify(dst + (size_t)k * CHUNK, CHUNK, SEED_A + k);
                if (bad >= 0) {
                    printf("FAIL %s completed SUCCESS with wrong data at %ld\n", what, bad);
                    rf++;
                }
            }
            if (!held && at[k] - t_dereg > BOUND_MS) {
                printf(
                    "FAIL round %d: read %d completed (%s) %lld ms after the dereg, more than "
                    "%d\n",
                    round, k, mt_st(st), at[k] - t_dereg, BOUND_MS);
                rf++;
            }
        }
        snprintf(what, sizeof(what), "round %d", round);
        rf += mt_tally_end(&t, what);
        if (gated && !held && hold_st != IBV_WC_SUCCESS) {
            printf("FAIL round %d: the send ahead of the reads completed %s\n", round,
                   mt_st((enum ibv_wc_status)hold_st));
            rf++;
        }
        if (held && (hold_st != IBV_WC_SUCCESS || t.ok > 0)) {
            printf(
                "FAIL round %d (held): the send completed %s and %d read(s) SUCCESS, expected "
                "SUCCESS and none\n",
                round, mt_st((enum ibv_wc_status)hold_st), t.ok);
            rf++;
        }
        if (dereg_ms > BOUND_MS) {
            printf("FAIL round %d: rpma_mr_dereg took %lld ms\n", round, dereg_ms);
            rf++;
        }
        if (t.first_err >= 0) conclusive++;
        printf(
            "round %d%s: %d SUCCESS, %d REM_ACCESS_ERR, %d WR_FLUSH_ERR; dereg took %lld ms, last "
            "completion %+lld ms after it; connection %s%s\n  status %s\n",
            round, held ? " (held)" : "", t.ok, t.errs, t.flushed, dereg_ms, last - t_dereg,
            rpma_utils_conn_event_2str(ev),
            t.first_err < 0 ? " (inconclusive: all answered before the dereg)" : "", t.line);
        failures += rf;
    }
    if (g_stalled && conclusive < ROUNDS) {
        printf("FAIL: %d of %d stalled rounds had reads in flight at the dereg\n", conclusive,
               ROUNDS);
        failures++;
    }
    if (!g_stalled && conclusive == 0) {
        printf("FAIL: no round had reads in flight at the dereg\n");
        failures++;
    }
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_mr_dereg(&mr_h));
    CHECK_OK(rpma_peer_delete(&peer));
    free(dst);
    free(hbuf);
    if (failures) IT_FAIL("%d check(s) failed", failures);
    printf("PASS (%d of %d rounds conclusive)\n", conclusive, ROUNDS);
}

int main(int argc, char *argv[]) {
    const char *variant;
    mt_init(argc, argv, &g_port, &variant);
    g_stalled = strcmp(variant, "stalled") == 0;
    if (!g_stalled && strcmp(variant, "natural") != 0) {
        fprintf(stderr, "usage: %s PORT natural|stalled\n", argv[0]);
        return 2;
    }
    int ctl = -1;
    int pid = mt_spawn(client, NULL, &ctl); /* before the library starts its threads */

    struct rpma_peer *peer = it_peer_new(MT_ADDR, true);
    char *src = it_alloc(LEN);
    for (int k = 0; k < NR; k++) it_fill(src + (size_t)k * CHUNK, CHUNK, SEED_A + k);
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, MT_ADDR, g_port, &ep));
    struct rpma_conn_cfg *cfg = mt_cfg(NR + 1);
    char *hbuf = it_alloc(HLEN);
    struct rpma_mr_local *mr_h = NULL;
    CHECK_OK(rpma_mr_reg(peer, hbuf, HLEN, RPMA_MR_USAGE_RECV, &mr_h));
    mt_say(ctl, "READY");
    char msg[MT_MSG];
    for (int round = 0; round < ROUNDS; round++) {
        struct rpma_mr_local *mr = NULL;
        CHECK_OK(rpma_mr_reg(peer, src, LEN, RPMA_MR_USAGE_READ_SRC, &mr));
        char desc[IT_MR_DESC_SIZE];
        CHECK_OK(rpma_mr_get_descriptor(mr, desc));
        struct rpma_conn_req *req = it_next_req(ep, cfg);
        struct rpma_conn *conn = it_accept(&req, desc, sizeof(desc));
        mt_expect(ctl, "POSTED", msg, 15000);
        if (g_stalled) {
            mt_stop(pid);
            CHECK_OK(rpma_recv(conn, mr_h, 0, HLEN, NULL)); /* the reads may go now */
            usleep(100 * 1000); /* the answers fill the sockets and queue up here */
        }
        long long t0 = it_now_ms();
        CHECK_OK(rpma_mr_dereg(&mr));
        long long t1 = it_now_ms();
        if (g_stalled) mt_cont(pid);
        mt_say(ctl, "DEREG %lld %lld", t1, t1 - t0);
        if (!g_stalled) CHECK_OK(rpma_recv(conn, mr_h, 0, HLEN, NULL)); /* releases a held round */
        /*
         * The application looks at the connection only once the client has all its completions:
         * the library must end the reads by itself, not wait for the application to delete the
         * connection.
         */
        mt_expect(ctl, "DONE", msg, 30000);
        enum rpma_conn_event ev = mt_next_event(conn, 30000);
        if (ev != RPMA_CONN_CLOSED && ev != RPMA_CONN_LOST)
            IT_FAIL("round %d: event %s", round, rpma_utils_conn_event_2str(ev));
        (void)rpma_conn_disconnect(conn);
        CHECK_OK(rpma_conn_delete(&conn));
    }
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr_h));
    CHECK_OK(rpma_peer_delete(&peer));
    free(src);
    free(hbuf);
    mt_reap(pid, 10000);
    return 0;
}
