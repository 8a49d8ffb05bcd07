/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dst_dereg.c -- the target deregisters its WRITE_DST region with writes in flight.
 *
 * usage: dst_dereg PORT
 *
 * Ten rounds, each on a fresh connection and a fresh registration. The client posts 64 signaled
 * 1 MiB writes, one per chunk of the server's region. The server watches its memory: once the
 * data of chunk t (a different one each round, early in the stream) starts to land it calls
 * rpma_mr_dereg and, right after it returns, copies the region (the snapshot). As on a NIC:
 *   - nothing is placed after the dereg: when the connection is over the memory still equals
 *     the snapshot, byte for byte;
 *   - a write that completes SUCCESS was fully placed: its chunk in the snapshot holds all of
 *     its data;
 *   - every other write completes with an error: IBV_WC_REM_ACCESS_ERR (at most one), then
 *     IBV_WC_WR_FLUSH_ERR; no SUCCESS follows an error.
 * A round in which every write was placed before the dereg proves nothing ("inconclusive"); at
 * least half of the rounds must be conclusive. Odd rounds are held, so that they are conclusive
 * on any transport (rxe executes a whole post at once): a send goes first, and the server
 * deregisters at once and only then posts its receive. RC executes in order and a send waits for
 * its receive (infinite RNR retry), so no write is placed before the dereg: the send completes
 * SUCCESS and no write does.
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "mem_common.h"

#define CHUNK (1u << 20)
#define NW 64
#define LEN ((size_t)NW * CHUNK)
#define ROUNDS 10
#define SEED_A 0xa1000
#define SEED_Z 0xc1000 /* + round * 0x100 */
#define WR_HOLD 999
#define HLEN 8

static const char *g_port;
static const int g_trigger[ROUNDS] = {1, 3, 6, 0, 2, 5, 8, 4, 7, 1};

/* The watch races with the library's writes on purpose (a NIC's DMA would race the same way);
 * TSan is not told about it, so the TSan build runs this test too. */
__attribute__((no_sanitize("thread"))) static uint64_t peek(const uint64_t *p) {
    return *(const volatile uint64_t *)p;
}

static void server(int ctl, void *arg) {
    (void)arg;
    struct rpma_peer *peer = it_peer_new(MT_ADDR, true);
    char *target = it_alloc(LEN), *snap = it_alloc(LEN);
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, MT_ADDR, g_port, &ep));
    struct rpma_conn_cfg *cfg = mt_cfg(NW + 1); /* the writes and a held round's send */
    char *hbuf = it_alloc(HLEN);
    struct rpma_mr_local *mr_h = NULL;
    CHECK_OK(rpma_mr_reg(peer, hbuf, HLEN, RPMA_MR_USAGE_RECV, &mr_h));
    mt_say(ctl, "READY");
    char msg[MT_MSG];
    for (int round = 0; round < ROUNDS; round++) {
        uint64_t zseed = SEED_Z + (uint64_t)round * 0x100;
        for (int k = 0; k < NW; k++) it_fill(target + (size_t)k * CHUNK, CHUNK, zseed + k);
        struct rpma_mr_local *mr = NULL;
        CHECK_OK(rpma_mr_reg(peer, target, LEN, RPMA_MR_USAGE_WRITE_DST, &mr));
        char desc[IT_MR_DESC_SIZE];
        CHECK_OK(rpma_mr_get_descriptor(mr, desc));
        struct rpma_conn_req *req = it_next_req(ep, cfg);
        struct rpma_conn *conn = it_accept(&req, desc, sizeof(desc));
        mt_expect(ctl, "POSTED", msg, 15000);

        /* wait for the first bytes of chunk t, then deregister at once */
        int t = g_trigger[round];
        uint64_t zword;
        it_fill(&zword, sizeof(zword), zseed + (uint64_t)t);
        const uint64_t *watch = (const uint64_t *)(target + (size_t)t * CHUNK);
        long long deadline = it_now_ms() + 10000;
        bool held = round % 2 == 1;
        while (!held && peek(watch) == zword)
            if (it_now_ms() > deadline)
                IT_FAIL("round %d: chunk %d never started to land", round, t);
        long long t0 = it_now_ms();
        CHECK_OK(rpma_mr_dereg(&mr));
        memcpy(snap, target, LEN);
        long long took = it_now_ms() - t0; /* the dereg and the snapshot */
        mt_say(ctl, "DEREG %lld", took);
        CHECK_OK(rpma_recv(conn, mr_h, 0, HLEN, NULL)); /* releases a held round */

        /* the application leaves the connection alone until the client has its completions */
        mt_expect(ctl, "DONE", msg, 30000);
        enum rpma_conn_event ev = mt_next_event(conn, 20000);
        if (ev != RPMA_CONN_CLOSED && ev != RPMA_CONN_LOST)
            IT_FAIL("round %d: event %s", round, rpma_utils_conn_event_2str(ev));
        (void)rpma_conn_disconnect(conn);
        CHECK_OK(rpma_conn_delete(&conn));

        long changed = mt_first_diff(target, snap, LEN);
        char classes[NW + 1];
        for (int k = 0; k < NW; k++) {
            const char *c = snap + (size_t)k * CHUNK;
            classes[k] = mt_is_pattern(c, CHUNK, SEED_A + k)  ? 'F'
                         : mt_is_pattern(c, CHUNK, zseed + k) ? 'N'
                                                              : 'P';
        }
        classes[NW] = '\0';
        mt_say(ctl, "REPORT %s %ld", classes, changed);
    }
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr_h));
    CHECK_OK(rpma_peer_delete(&peer));
    free(target);
    free(snap);
    free(hbuf);
}

int main(int argc, char *argv[]) {
    const char *variant;
    mt_init(argc, argv, &g_port, &variant);
    int ctl = -1;
    int pid = mt_spawn(server, NULL, &ctl);
    char msg[MT_MSG];
    mt_expect(ctl, "READY", msg, 20000);

    struct rpma_peer *peer = it_peer_new(MT_ADDR, false);
    char *src = it_alloc(LEN);
    for (int k = 0; k < NW; k++) it_fill(src + (size_t)k * CHUNK, CHUNK, SEED_A + k);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, src, LEN, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_SEND, &mr));
    struct rpma_conn_cfg *cfg = mt_cfg(NW + 1); /* the writes and a held round's send */

    int failures = 0, conclusive = 0;
    for (int round = 0; round < ROUNDS; round++) {
        struct rpma_conn *conn = it_connect(peer, MT_ADDR, g_port, cfg, NULL, 0);
        struct rpma_mr_remote *remote = it_remote_mr(conn, 0);
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conn, &cq));
        bool held = round % 2 == 1;
        if (held) CHECK_OK(rpma_send(conn, mr, 0, HLEN, RPMA_F_COMPLETION_ALWAYS, (void *)WR_HOLD));
        for (int k = 0; k < NW; k++)
            CHECK_OK(rpma_write(conn, remote, (size_t)k * CHUNK, mr, (size_t)k * CHUNK, CHUNK,
                                RPMA_F_COMPLETION_ALWAYS, (void *)(uintptr_t)k));
        mt_say(ctl, "POSTED");
        int status[NW], hold_st = -1;
        for (int k = 0; k < NW; k++) status[k] = -1;
        for (int got = 0; got < NW + held; got++) {
            struct ibv_wc wc;
            mt_cq_get(cq, &wc, 15000, NULL);
            if (held && wc.wr_id == WR_HOLD && hold_st == -1) {
                hold_st = (int)wc.status;
                continue;
            }
            if (wc.wr_id >= NW || status[wc.wr_id] != -1)
                IT_FAIL("round %d: unexpected completion wr_id %llu", round,
                        (unsigned long long)wc.wr_id);
            status[wc.wr_id] = (int)wc.status;
        }
        mt_say(ctl, "DONE");
        enum rpma_conn_event ev = mt_close(&conn, 15000);
        CHECK_OK(rpma_mr_remote_delete(&remote));
        const char *took = mt_expect(ctl, "DEREG", msg, 15000);
        long long dereg_ms = atoll(took);
        char classes[NW + 1];
        long changed = -1;
        const char *rep = mt_expect(ctl, "REPORT", msg, 30000);
        if (sscanf(rep, "%64s %ld", classes, &changed) != 2) IT_FAIL("bad report '%s'", rep);

        int rf = 0;
        struct mt_tally t;
        mt_tally_init(&t, IBV_WC_REM_ACCESS_ERR, 'A');
        char what[64];
        for (int k = 0; k < NW; k++) {
            snprintf(what, sizeof(what), "round %d: write %d", round, k);
            if (mt_tally_add(&t, k, (enum ibv_wc_status)status[k], what) && classes[k] != 'F') {
                printf("FAIL %s completed SUCCESS, its chunk was %s when the dereg returned\n",
                       what, classes[k] == 'N' ? "untouched" : "only partly written");
                rf++;
            }
        }
        snprintf(what, sizeof(what), "round %d", round);
        rf += mt_tally_end(&t, what);
        if (held && (hold_st != IBV_WC_SUCCESS || t.ok > 0)) {
            printf(
                "FAIL round %d (held): the send completed %s and %d write(s) SUCCESS, expected "
                "SUCCESS and none\n",
                round, mt_st((enum ibv_wc_status)hold_st), t.ok);
            rf++;
        }
        if (changed >= 0) {
            printf(
                "FAIL round %d: the server's memory changed after the dereg (offset %ld, "
                "chunk %ld)\n",
                round, changed, changed / (long)CHUNK);
            rf++;
        }
        if (t.first_err >= 0) conclusive++;
        printf(
            "round %d (%s %d, dereg+snapshot %lld ms): %d SUCCESS, %d REM_ACCESS_ERR, "
            "%d WR_FLUSH_ERR, connection %s%s\n  status %s\n  placed %s\n",
            round, held ? "held, chunk" : "dereg at chunk", g_trigger[round], dereg_ms, t.ok,
            t.errs, t.flushed, rpma_utils_conn_event_2str(ev),
            t.first_err < 0 ? " (inconclusive: all placed before the dereg)" : "", t.line, classes);
        failures += rf;
    }
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(src);
    mt_reap(pid, 10000);
    if (conclusive < ROUNDS / 2) {
        printf("FAIL: only %d of %d rounds had a write in flight at the dereg\n", conclusive,
               ROUNDS);
        failures++;
    }
    if (failures) IT_FAIL("%d check(s) failed", failures);
    printf("PASS (%d of %d rounds conclusive)\n", conclusive, ROUNDS);
    return 0;
}
