/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * read_dst_dereg.c -- the requester deregisters its read destination with reads in flight.
 *
 * usage: read_dst_dereg PORT marker|free
 *
 * Six rounds, each on a fresh connection and registration. The client posts 16 signaled 2 MiB
 * reads into its region D and at once deregisters D. Even rounds race with the answers as they
 * stream in; odd rounds hold the reads: a send goes first, and the server posts its receive only
 * after the dereg. RC executes in order and a send waits for its receive (infinite RNR retry),
 * so every answer arrives for a dead region, on a NIC as in rpma. Right after the dereg returns:
 *   marker  the client copies D (the snapshot) and fills D with a marker byte;
 *   free    the client frees D (glibc unmaps a block this big, so a later write faults; under
 *           ASan the block is poisoned, so a write is reported).
 * As on a NIC, which stops writing a region once it is deregistered:
 *   - nothing is written into D after the dereg: once the connection is over D still holds
 *     the marker everywhere (marker);
 *   - a read that completes SUCCESS had all of its data placed before the dereg: its chunk of
 *     the snapshot holds it (marker); in a held round no read completes SUCCESS (the send
 *     does);
 *   - the others complete IBV_WC_LOC_PROT_ERR (rxe: or LOC_QP_OP_ERR; at most one: the queue
 *     pair then enters the error state) or IBV_WC_WR_FLUSH_ERR; no SUCCESS follows an error;
 *   - after such an error a new read (into a live region) completes IBV_WC_WR_FLUSH_ERR.
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "mem_common.h"

#define CHUNK (2u << 20)
#define NR 16
#define LEN ((size_t)NR * CHUNK)
#define ROUNDS 6
#define SEED_A 0xa5000
#define MARK 0x6b
#define ELEN 64
#define WR_LATE 999
#define WR_HOLD 998
#define HLEN 8

static const char *g_port;

static void server(int ctl, void *arg) {
    (void)arg;
    struct rpma_peer *peer = it_peer_new(MT_ADDR, true);
    char *src = it_alloc(LEN);
    for (int k = 0; k < NR; k++) it_fill(src + (size_t)k * CHUNK, CHUNK, SEED_A + k);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, src, LEN, RPMA_MR_USAGE_READ_SRC, &mr));
    char desc[IT_MR_DESC_SIZE];
    CHECK_OK(rpma_mr_get_descriptor(mr, desc));
    char *hbuf = it_alloc(HLEN);
    struct rpma_mr_local *mr_h = NULL;
    CHECK_OK(rpma_mr_reg(peer, hbuf, HLEN, RPMA_MR_USAGE_RECV, &mr_h));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, MT_ADDR, g_port, &ep));
    struct rpma_conn_cfg *cfg = mt_cfg(NR + 2);
    mt_say(ctl, "READY");
    for (int round = 0; round < ROUNDS; round++) {
        struct rpma_conn_req *req = it_next_req(ep, cfg);
        struct rpma_conn *conn = it_accept(&req, desc, sizeof(desc));
        /* the receive for a held round's send, once the client has deregistered */
        char msg[MT_MSG];
        mt_expect(ctl, "GO", msg, 30000);
        CHECK_OK(rpma_recv(conn, mr_h, 0, HLEN, NULL));
        enum rpma_conn_event ev = mt_next_event(conn, 30000);
        if (ev != RPMA_CONN_CLOSED && ev != RPMA_CONN_LOST)
            IT_FAIL("round %d: event %s", round, rpma_utils_conn_event_2str(ev));
        (void)rpma_conn_disconnect(conn);
        CHECK_OK(rpma_conn_delete(&conn));
    }
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_mr_dereg(&mr_h));
    CHECK_OK(rpma_peer_delete(&peer));
    free(src);
    free(hbuf);
}

int main(int argc, char *argv[]) {
    const char *variant;
    mt_init(argc, argv, &g_port, &variant);
    bool do_free = strcmp(variant, "free") == 0;
    if (!do_free && strcmp(variant, "marker") != 0) {
        fprintf(stderr, "usage: %s PORT marker|free\n", argv[0]);
        return 2;
    }
    int ctl = -1;
    int pid = mt_spawn(server, NULL, &ctl);
    char msg[MT_MSG];
    mt_expect(ctl, "READY", msg, 20000);

    struct rpma_peer *peer = it_peer_new(MT_ADDR, false);
    char *snap = do_free ? NULL : it_alloc(LEN);
    char *ebuf = it_alloc(ELEN);
    struct rpma_mr_local *mr_e = NULL;
    CHECK_OK(rpma_mr_reg(peer, ebuf, ELEN, RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_SEND, &mr_e));
    struct rpma_conn_cfg *cfg = mt_cfg(NR + 2);
    int failures = 0, conclusive = 0;
    for (int round = 0; round < ROUNDS; round++) {
        bool held = round % 2 == 1;
        char *dst = it_alloc(LEN);
        struct rpma_mr_local *mr = NULL;
        CHECK_OK(rpma_mr_reg(peer, dst, LEN, RPMA_MR_USAGE_READ_DST, &mr));
        struct rpma_conn *conn = it_connect(peer, MT_ADDR, g_port, cfg, NULL, 0);
        struct rpma_mr_remote *remote = it_remote_mr(conn, 0);
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conn, &cq));

        if (held)
            CHECK_OK(rpma_send(conn, mr_e, 0, HLEN, RPMA_F_COMPLETION_ALWAYS, (void *)WR_HOLD));
        for (int k = 0; k < NR; k++)
            CHECK_OK(rpma_read(conn, mr, (size_t)k * CHUNK, remote, (size_t)k * CHUNK, CHUNK,
                               RPMA_F_COMPLETION_ALWAYS, (void *)(uintptr_t)k));
        long long t0 = it_now_ms();
        CHECK_OK(rpma_mr_dereg(&mr));
        long long dereg_ms = it_now_ms() - t0;
        if (do_free) {
            free(dst);
            dst = NULL;
        } else {
            memcpy(snap, dst, LEN);
            memset(dst, MARK, LEN);
        }
        mt_say(ctl, "GO");

        int status[NR], hold_st = -1;
        for (int k = 0; k < NR; k++) status[k] = -1;
        for (int got = 0; got < NR + held; got++) {
            struct ibv_wc wc;
            mt_cq_get(cq, &wc, 15000, NULL);
            if (held && wc.wr_id == WR_HOLD && hold_st == -1) {
                hold_st = (int)wc.status;
                continue;
            }
            if (wc.wr_id >= NR || status[wc.wr_id] != -1)
                IT_FAIL("round %d: unexpected completion wr_id %llu", round,
                        (unsigned long long)wc.wr_id);
            status[wc.wr_id] = (int)wc.status;
        }
        /* a read into a live region, posted after the others completed */
        CHECK_OK(
            rpma_read(conn, mr_e, 0, remote, 0, ELEN, RPMA_F_COMPLETION_ALWAYS, (void *)WR_LATE));
        struct ibv_wc late;
        mt_cq_get(cq, &late, 15000, NULL);
        CHECK_EQ(late.wr_id, WR_LATE);
        enum rpma_conn_event ev = mt_close(&conn, 15000);
        CHECK_OK(rpma_mr_remote_delete(&remote));

        int rf = 0;
        struct mt_tally t;
        mt_tally_local(&t, 'P');
        char what[64];
        for (int k = 0; k < NR; k++) {
            snprintf(what, sizeof(what), "round %d: read %d", round, k);
            if (!mt_tally_add(&t, k, (enum ibv_wc_status)status[k], what)) continue;
            if (!do_free && it_verify(snap + (size_t)k * CHUNK, CHUNK, SEED_A + k) >= 0) {
                printf(
                    "FAIL %s completed SUCCESS without all of its data placed before the "
                    "dereg\n",
                    what);
                rf++;
            }
            if (held) {
                printf(
                    "FAIL %s completed SUCCESS although no answer could arrive before the "
                    "dereg\n",
                    what);
                rf++;
            }
        }
        snprintf(what, sizeof(what), "round %d", round);
        rf += mt_tally_end(&t, what);
        if (held && hold_st != IBV_WC_SUCCESS) {
            printf("FAIL round %d: the holding send completed %s, expected SUCCESS\n", round,
                   mt_st((enum ibv_wc_status)hold_st));
            rf++;
        }
        if (t.first_err >= 0 && late.status != IBV_WC_WR_FLUSH_ERR) {
            printf(
                "FAIL round %d: a read posted after the error completed %s, expected "
                "WR_FLUSH_ERR (the queue pair is in the error state)\n",
                round, mt_st(late.status));
            rf++;
        }
        if (!do_free) {
            long bad = -1;
            for (size_t i = 0; i < LEN && bad < 0; i++)
                if ((uint8_t)dst[i] != MARK) bad = (long)i;
            if (bad >= 0) {
                printf(
                    "FAIL round %d: the deregistered destination was written after the "
                    "dereg (offset %ld, chunk %ld)\n",
                    round, bad, bad / (long)CHUNK);
                rf++;
            }
            free(dst);
        }
        if (t.first_err >= 0) conclusive++;
        printf(
            "round %d (%s): %d SUCCESS, %d %s, %d WR_FLUSH_ERR, late read %s; "
            "dereg took %lld ms; connection %s\n  status %s\n",
            round, held ? "held" : "racing", t.ok, t.errs, mt_tally_err(&t), t.flushed,
            mt_st(late.status), dereg_ms, rpma_utils_conn_event_2str(ev), t.line);
        failures += rf;
    }
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&mr_e));
    CHECK_OK(rpma_peer_delete(&peer));
    free(snap);
    free(ebuf);
    mt_reap(pid, 10000);
    if (conclusive < ROUNDS / 2) {
        printf("FAIL: only %d of %d rounds had reads in flight at the dereg\n", conclusive, ROUNDS);
        failures++;
    }
    if (failures) IT_FAIL("%d check(s) failed", failures);
    printf("PASS (%d of %d rounds conclusive)\n", conclusive, ROUNDS);
    return 0;
}
