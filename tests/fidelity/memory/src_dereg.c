/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * src_dereg.c -- the source of queued writes and sends is deregistered (initiator side).
 *
 * usage: src_dereg PORT overwrite|stalled|free|free_stalled|message_stalled
 *
 * The client posts 40 signaled 1 MiB writes with 4 sends of 64 KiB among them, all from one
 * region, and at once deregisters that region; most of the data still sits in the send queue
 * behind a full socket. Then:
 *   overwrite  it fills the source with a different pattern (B);
 *   stalled    the same, with the server process stopped (SIGSTOP) from before the first post
 *              until after the overwrite, so nothing can drain meanwhile;
 *   free       it frees the source (glibc gives a 40 MiB block back with munmap: a later read
 *              fails or faults; under ASan the block is poisoned, so a read is reported);
 *   free_stalled  free with the server stopped;
 *   message_stalled  stalled, with 16 MiB sends, each posted before its 10 writes: the dereg
 *              finds the first send half sent. Finishing it would complete the receive, which on
 *              a NIC never sees its last packet: the send completes LOC_PROT_ERR, the receive
 *              does not complete SUCCESS, the rest is flushed (the connection ends).
 * A racing round (overwrite, free) may find everything sent before the dereg (a busy machine
 * can deschedule the posting thread; rxe executes a whole post at once); it is repeated then, up
 * to 10 rounds, and every second round is held so that it is conclusive on any transport: a send
 * from another region goes first, and the server posts its receive only after the dereg (and
 * the receives for the 4 sends once it has completed). RC executes in order and a send waits for
 * its receive (infinite RNR retry), so a NIC has taken nothing after it before the dereg.
 * As on a NIC, which stops reading a region once it is deregistered:
 *   - a write or send completes SUCCESS only if its whole payload was taken before the dereg:
 *     the target chunk (receive buffer) holds exactly the original pattern (A);
 *   - the others complete IBV_WC_LOC_PROT_ERR (at most one: the first found with a dead source)
 *     or IBV_WC_WR_FLUSH_ERR (the queue pair is then in the error state); no SUCCESS follows an
 *     error in posting order;
 *   - the target never holds a word of pattern B;
 *   - nothing crashes (ASan clean in an ASan build).
 * The server reports what its memory holds per chunk over the control socket.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "mem_common.h"

#define CHUNK (1u << 20)
#define NW 40 /* writes */
#define NS 4  /* sends, one after every 10 writes */
#define SLEN g_slen
#define SRC_LEN ((size_t)NW * CHUNK + (size_t)NS * SLEN)
#define SEND_OFF ((size_t)NW * CHUNK)
#define NOPS (NW + NS)
#define SEED_A 0xa0000
#define SEED_B 0xb0000
#define SEED_Z 0xc0000
#define SEND_SEED 0x100 /* added for the send areas */
#define WR_WRITE 1000
#define WR_SEND 2000
#define WR_RECV 3000
#define WR_HOLD 4000
#define HLEN 8

static const char *g_port;
static size_t g_slen = 64u << 10; /* a send's length */
static bool g_stalled, g_free, g_message_first;

/* F: all pattern A; N: untouched (Z); P: partly A; L: holds words of pattern B */
static char classify(const char *buf, size_t len, uint64_t a, uint64_t b, uint64_t z) {
    if (mt_is_pattern(buf, len, a)) return 'F';
    if (mt_count_words(buf, len, b, a) > 0) return 'L';
    if (mt_is_pattern(buf, len, z)) return 'N';
    return 'P';
}

static void server(int ctl, void *arg) {
    (void)arg;
    struct rpma_peer *peer = it_peer_new(MT_ADDR, true);
    char *target = it_alloc((size_t)NW * CHUNK), *rbuf = it_alloc((size_t)NS * SLEN);
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, MT_ADDR, g_port, &ep));
    struct rpma_conn_cfg *cfg = mt_cfg(64);
    char *hbuf = it_alloc(HLEN);
    struct rpma_mr_local *mr_h = NULL;
    CHECK_OK(rpma_mr_reg(peer, hbuf, HLEN, RPMA_MR_USAGE_RECV, &mr_h));
    mt_say(ctl, "READY");
    char msg[MT_MSG];
    for (;;) {
        mt_hear(ctl, msg, 30000);
        if (strcmp(msg, "QUIT") == 0) break;
        bool held = strcmp(msg, "ROUND held") == 0;
        CHECK(held || strcmp(msg, "ROUND") == 0);
        for (int k = 0; k < NW; k++) it_fill(target + (size_t)k * CHUNK, CHUNK, SEED_Z + k);
        for (int r = 0; r < NS; r++) it_fill(rbuf + (size_t)r * SLEN, SLEN, SEED_Z + SEND_SEED + r);
        struct rpma_mr_local *mr_t = NULL, *mr_r = NULL;
        CHECK_OK(rpma_mr_reg(peer, target, (size_t)NW * CHUNK, RPMA_MR_USAGE_WRITE_DST, &mr_t));
        CHECK_OK(rpma_mr_reg(peer, rbuf, (size_t)NS * SLEN, RPMA_MR_USAGE_RECV, &mr_r));
        char desc[IT_MR_DESC_SIZE];
        CHECK_OK(rpma_mr_get_descriptor(mr_t, desc));
        struct rpma_conn_req *req = it_next_req(ep, cfg);
        for (int r = 0; r < NS && !held; r++)
            CHECK_OK(rpma_conn_req_recv(req, mr_r, (size_t)r * SLEN, SLEN,
                                        (void *)(uintptr_t)(WR_RECV + r)));
        struct rpma_conn *conn = it_accept(&req, desc, sizeof(desc));
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conn, &cq));
        if (held) {
            /* the hold's receive once the client has deregistered, the others after it */
            mt_expect(ctl, "GO", msg, 30000);
            CHECK_OK(rpma_recv(conn, mr_h, 0, HLEN, (void *)WR_HOLD));
            struct ibv_wc hw;
            mt_cq_get(cq, &hw, 15000, NULL);
            CHECK_EQ(hw.wr_id, WR_HOLD);
            CHECK_EQ(hw.status, IBV_WC_SUCCESS);
            for (int r = 0; r < NS; r++)
                CHECK_OK(rpma_recv(conn, mr_r, (size_t)r * SLEN, SLEN,
                                   (void *)(uintptr_t)(WR_RECV + r)));
        }
        /* the client ends the connection once all its completions are in */
        enum rpma_conn_event ev = mt_next_event(conn, 30000);
        if (ev != RPMA_CONN_CLOSED && ev != RPMA_CONN_LOST)
            IT_FAIL("server: event %s", rpma_utils_conn_event_2str(ev));
        /* receives that matched a send are in the CQ by now; the rest may be flushed */
        int rst[NS];
        for (int r = 0; r < NS; r++) rst[r] = -1;
        long long until = it_now_ms() + 1000;
        struct ibv_wc wc;
        while (it_now_ms() < until && it_cq_next(cq, &wc, (int)(until - it_now_ms()))) {
            int r = (int)wc.wr_id - WR_RECV;
            if (r < 0 || r >= NS)
                IT_FAIL("server: completion with wr_id %llu", (unsigned long long)wc.wr_id);
            if (rst[r] != -1) IT_FAIL("server: receive %d completed twice", r);
            rst[r] = (int)wc.status;
            if (wc.status == IBV_WC_SUCCESS) CHECK_EQ(wc.byte_len, SLEN);
        }
        CHECK_OK(rpma_conn_disconnect(conn));
        CHECK_OK(rpma_conn_delete(&conn));
        CHECK_OK(rpma_mr_dereg(&mr_t));
        CHECK_OK(rpma_mr_dereg(&mr_r));

        char chunks[NW + 1], recvs[NS + 1];
        for (int k = 0; k < NW; k++)
            chunks[k] =
                classify(target + (size_t)k * CHUNK, CHUNK, SEED_A + k, SEED_B + k, SEED_Z + k);
        for (int r = 0; r < NS; r++)
            recvs[r] = classify(rbuf + (size_t)r * SLEN, SLEN, SEED_A + SEND_SEED + r,
                                SEED_B + SEND_SEED + r, SEED_Z + SEND_SEED + r);
        chunks[NW] = recvs[NS] = '\0';
        mt_say(ctl, "REPORT %s %s %d %d %d %d", chunks, recvs, rst[0], rst[1], rst[2], rst[3]);
    }
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr_h));
    CHECK_OK(rpma_peer_delete(&peer));
    free(target);
    free(rbuf);
    free(hbuf);
}

static void post_send(struct rpma_conn *conn, struct rpma_mr_local *mr, int r, uint64_t *order,
                      int *n) {
    CHECK_OK(rpma_send(conn, mr, SEND_OFF + (size_t)r * SLEN, SLEN, RPMA_F_COMPLETION_ALWAYS,
                       (void *)(uintptr_t)(WR_SEND + r)));
    order[(*n)++] = WR_SEND + r;
}

/*
 * One round on a fresh connection; returns the number of failed checks and sets *conclusive when
 * some operation was still in flight at the dereg.
 */
static int round_trip(int round, int ctl, int pid, bool *conclusive) {
    bool held = !g_stalled && round % 2 == 1;
    struct rpma_peer *peer = it_peer_new(MT_ADDR, false);
    char hbuf[HLEN] = {0};
    struct rpma_mr_local *mr_h = NULL;
    CHECK_OK(rpma_mr_reg(peer, hbuf, HLEN, RPMA_MR_USAGE_SEND, &mr_h));
    /* free: a heap block (so that ASan tracks it); otherwise a mapping of its own */
    char *src = g_free ? it_alloc(SRC_LEN) : mt_map(SRC_LEN);
    for (int k = 0; k < NW; k++) it_fill(src + (size_t)k * CHUNK, CHUNK, SEED_A + k);
    for (int r = 0; r < NS; r++)
        it_fill(src + SEND_OFF + (size_t)r * SLEN, SLEN, SEED_A + SEND_SEED + r);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, src, SRC_LEN, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_SEND, &mr));
    struct rpma_conn_cfg *cfg = mt_cfg(64);
    mt_say(ctl, held ? "ROUND held" : "ROUND");
    struct rpma_conn *conn = it_connect(peer, MT_ADDR, g_port, cfg, NULL, 0);
    struct rpma_mr_remote *remote = it_remote_mr(conn, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    /* posting order: wr_ids */
    uint64_t order[NOPS];
    int n = 0;
    if (g_stalled) mt_stop(pid);
    if (held) CHECK_OK(rpma_send(conn, mr_h, 0, HLEN, RPMA_F_COMPLETION_ALWAYS, (void *)WR_HOLD));
    for (int k = 0; k < NW; k++) {
        if (k % 10 == 0 && g_message_first) post_send(conn, mr, k / 10, order, &n);
        CHECK_OK(rpma_write(conn, remote, (size_t)k * CHUNK, mr, (size_t)k * CHUNK, CHUNK,
                            RPMA_F_COMPLETION_ALWAYS, (void *)(uintptr_t)(WR_WRITE + k)));
        order[n++] = WR_WRITE + k;
        if (k % 10 == 9 && !g_message_first) post_send(conn, mr, k / 10, order, &n);
    }
    long long t0 = it_now_ms();
    CHECK_OK(rpma_mr_dereg(&mr));
    long long t_dereg = it_now_ms() - t0;
    if (g_free) {
        free(src);
    } else {
        for (int k = 0; k < NW; k++) it_fill(src + (size_t)k * CHUNK, CHUNK, SEED_B + k);
        for (int r = 0; r < NS; r++)
            it_fill(src + SEND_OFF + (size_t)r * SLEN, SLEN, SEED_B + SEND_SEED + r);
    }
    if (g_stalled) mt_cont(pid);
    if (held) mt_say(ctl, "GO");

    /* every operation completes, in any status */
    int status[NOPS], hold_st = -1;
    for (int i = 0; i < NOPS; i++) status[i] = -1;
    for (int got = 0; got < NOPS + held; got++) {
        struct ibv_wc wc;
        mt_cq_get(cq, &wc, 15000, NULL);
        if (held && wc.wr_id == WR_HOLD && hold_st == -1) {
            hold_st = (int)wc.status;
            continue;
        }
        int i = 0;
        while (i < NOPS && order[i] != wc.wr_id) i++;
        if (i == NOPS) IT_FAIL("completion with unknown wr_id %llu", (unsigned long long)wc.wr_id);
        if (status[i] != -1) IT_FAIL("wr_id %llu completed twice", (unsigned long long)wc.wr_id);
        status[i] = (int)wc.status;
    }
    enum rpma_conn_event ev = mt_close(&conn, 15000);
    CHECK_OK(rpma_mr_remote_delete(&remote));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&mr_h));
    CHECK_OK(rpma_peer_delete(&peer));
    if (!g_free) mt_unmap(src, SRC_LEN);

    char chunks[NW + 1], recvs[NS + 1], msg[MT_MSG];
    int rst[NS];
    const char *rep = mt_expect(ctl, "REPORT", msg, 30000);
    if (sscanf(rep, "%40s %4s %d %d %d %d", chunks, recvs, &rst[0], &rst[1], &rst[2], &rst[3]) != 6)
        IT_FAIL("bad report '%s'", rep);

    int failures = 0;
    struct mt_tally t;
    mt_tally_local(&t, 'P');
    char placed[NOPS + 1], name[64];
    for (int i = 0; i < NOPS; i++) {
        bool is_write = order[i] < WR_SEND;
        int idx = (int)(order[i] - (is_write ? WR_WRITE : WR_SEND));
        char what = is_write ? chunks[idx] : recvs[idx];
        const char *kind = is_write ? "write" : "send";
        enum ibv_wc_status st = (enum ibv_wc_status)status[i];
        snprintf(name, sizeof(name), "round %d: %s %d", round, kind, idx);
        placed[i] = what;
        if (mt_tally_add(&t, i, st, name)) {
            if (what != 'F') {
                printf("FAIL: %s %d completed SUCCESS but the target holds %s\n", kind, idx,
                       what == 'L' ? "data written into the source after the dereg"
                                   : "not all of its data");
                failures++;
            }
            if (!is_write && rst[idx] != IBV_WC_SUCCESS) {
                printf("FAIL: send %d completed SUCCESS, its receive %s\n", idx,
                       rst[idx] == -1 ? "did not complete" : mt_st(rst[idx]));
                failures++;
            }
        }
        if (what == 'L') {
            printf("FAIL: %s %d: the target holds words written into the source after the dereg\n",
                   kind, idx);
            failures++;
        }
        if (!is_write && rst[idx] == IBV_WC_SUCCESS && what != 'F') {
            printf("FAIL: receive %d completed SUCCESS without the whole message\n", idx);
            failures++;
        }
    }
    placed[NOPS] = '\0';
    snprintf(name, sizeof(name), "round %d", round);
    failures += mt_tally_end(&t, name);
    if (held && hold_st != IBV_WC_SUCCESS) {
        printf("FAIL round %d: the holding send completed %s, expected SUCCESS\n", round,
               mt_st((enum ibv_wc_status)hold_st));
        failures++;
    }
    if (held && t.first_err < 0) {
        printf("FAIL: every operation completed SUCCESS although they were held\n");
        failures++;
    }
    if (g_stalled && t.first_err < 0) {
        printf("FAIL: every operation completed SUCCESS although the server was stopped\n");
        failures++;
    }
    if (g_message_first && (t.first_err != 0 || t.errs != 1)) {
        printf("FAIL: the half-sent send 0 did not complete LOC_PROT_ERR first\n");
        failures++;
    }
    *conclusive = t.first_err >= 0;
    printf(
        "round %d%s: %d SUCCESS, %d %s, %d WR_FLUSH_ERR, %d other; dereg took %lld "
        "ms; connection ended %s%s\n  status %s\n  target %s\n",
        round, held ? " (held)" : "", t.ok, t.errs, mt_tally_err(&t), t.flushed, t.other, t_dereg,
        rpma_utils_conn_event_2str(ev),
        t.first_err < 0 ? " (inconclusive: all sent before the dereg)" : "", t.line, placed);
    return failures;
}

int main(int argc, char *argv[]) {
    const char *variant;
    mt_init(argc, argv, &g_port, &variant);
    g_message_first = strcmp(variant, "message_stalled") == 0;
    g_stalled = strstr(variant, "stalled") != NULL;
    g_free = strncmp(variant, "free", 4) == 0;
    if (g_message_first) g_slen = 16u << 20;
    if (!g_stalled && !g_free && strcmp(variant, "overwrite") != 0) {
        fprintf(stderr, "usage: %s PORT overwrite|stalled|free|free_stalled|message_stalled\n",
                argv[0]);
        return 2;
    }
    int ctl = -1;
    int pid = mt_spawn(server, NULL, &ctl);
    char msg[MT_MSG];
    mt_expect(ctl, "READY", msg, 20000);
    /* a racing round may find everything sent already: up to 10 rounds for one that does not */
    int failures = 0, round = 0;
    bool conclusive = false;
    for (; round < 10 && !failures && !conclusive; round++)
        failures += round_trip(round, ctl, pid, &conclusive);
    mt_say(ctl, "QUIT");
    mt_reap(pid, 10000);
    if (failures) IT_FAIL("%s: %d check(s) failed", variant, failures);
    if (!conclusive)
        IT_FAIL("%s: in %d rounds the dereg never found anything in flight", variant, round);
    printf("%s: PASS\n", variant);
    return 0;
}
