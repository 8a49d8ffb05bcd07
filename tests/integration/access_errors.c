/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * access_errors.c -- remote access violations, one connection per case:
 *   bad_rkey      the region descriptor's rkey is tampered with
 *   out_of_range  the write runs past the end of the region
 *   no_usage      the region was registered without RPMA_MR_USAGE_WRITE_DST
 * Each violation gives an error completion (IBV_WC_REM_ACCESS_ERR or IBV_WC_REM_INV_REQ_ERR)
 * with the right wr_id; operations posted afterwards on that connection complete with
 * IBV_WC_WR_FLUSH_ERR. The server checks after every case that its regions and the guard bytes
 * around them are unchanged. A last case writes legally, to show the same path does work.
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "common.h"

#define PAGE 4096
#define BUF (3 * PAGE) /* guard page, registered page, guard page */
#define SEED_X 0xacc1
#define SEED_Y 0xacc2
#define SEED_NEW 0xacc3
#define LEN 64
#define RKEY_OFF 16 /* address u64, length u64, rkey u32, usage u8 */

enum { CASE_BAD_RKEY, CASE_OUT_OF_RANGE, CASE_NO_USAGE, CASE_VALID, CASES };
static const char *const names[CASES] = {"bad_rkey", "out_of_range", "no_usage", "valid"};

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *x = it_alloc(BUF), *y = it_alloc(BUF);
    it_fill(x, BUF, SEED_X);
    it_fill(y, BUF, SEED_Y);
    struct rpma_mr_local *mr_a = NULL, *mr_b = NULL;
    CHECK_OK(
        rpma_mr_reg(peer, x + PAGE, PAGE, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC, &mr_a));
    CHECK_OK(rpma_mr_reg(peer, y + PAGE, PAGE, RPMA_MR_USAGE_READ_SRC, &mr_b));
    char pdata[2 * IT_MR_DESC_SIZE];
    CHECK_OK(rpma_mr_get_descriptor(mr_a, pdata));
    CHECK_OK(rpma_mr_get_descriptor(mr_b, pdata + IT_MR_DESC_SIZE));

    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    for (int c = 0; c < CASES; c++) {
        struct rpma_conn_req *req = it_next_req(ep, NULL);
        struct rpma_conn *conn = it_accept(&req, pdata, sizeof(pdata));
        it_disconnect_passive(&conn, true);
        long bad;
        if (c == CASE_VALID) {
            CHECK_EQ(it_verify(x + PAGE, LEN, SEED_NEW), -1);
            char *ref = it_alloc(BUF);
            it_fill(ref, BUF, SEED_X);
            CHECK(memcmp(x, ref, PAGE) == 0);
            CHECK(memcmp(x + PAGE + LEN, ref + PAGE + LEN, BUF - PAGE - LEN) == 0);
            free(ref);
        } else if ((bad = it_verify(x, BUF, SEED_X)) >= 0) {
            IT_FAIL("case %s: region A buffer changed at %ld (%s)", names[c], bad,
                    bad < PAGE || bad >= 2 * PAGE ? "guard" : "target");
        }
        if ((bad = it_verify(y, BUF, SEED_Y)) >= 0)
            IT_FAIL("case %s: region B buffer changed at %ld (%s)", names[c], bad,
                    bad < PAGE || bad >= 2 * PAGE ? "guard" : "target");
        printf("case %s: memory as expected\n", names[c]);
    }
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr_a));
    CHECK_OK(rpma_mr_dereg(&mr_b));
    CHECK_OK(rpma_peer_delete(&peer));
    free(x);
    free(y);
}

static void run_case(const struct it_args *a, struct rpma_peer *peer, int c,
                     struct rpma_mr_local *src, struct rpma_mr_local *dst) {
    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    struct rpma_mr_remote *ra = it_remote_mr(conn, 0);
    struct rpma_mr_remote *rb = it_remote_mr(conn, IT_MR_DESC_SIZE);

    if (c == CASE_VALID) {
        CHECK_OK(rpma_write(conn, ra, 0, src, 0, LEN, RPMA_F_COMPLETION_ALWAYS, (void *)0xe0));
        it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)0xe0);
    } else {
        struct rpma_mr_remote *target = NULL;
        size_t off = 0;
        if (c == CASE_BAD_RKEY) {
            struct rpma_conn_private_data pd = {0};
            CHECK_OK(rpma_conn_get_private_data(conn, &pd));
            unsigned char desc[IT_MR_DESC_SIZE];
            memcpy(desc, pd.ptr, sizeof(desc));
            for (int i = 0; i < 4; i++) desc[RKEY_OFF + i] ^= (unsigned char)(0x5a + i);
            CHECK_OK(rpma_mr_remote_from_descriptor(desc, sizeof(desc), &target));
        } else if (c == CASE_OUT_OF_RANGE) {
            target = ra;
            off = PAGE - LEN / 2; /* half inside, half past the end */
        } else {
            target = rb; /* no WRITE_DST */
        }
        /* accepted when posting: the remote side checks when executing */
        CHECK_OK(
            rpma_write(conn, target, off, src, 0, LEN, RPMA_F_COMPLETION_ALWAYS, (void *)0xe1));
        struct ibv_wc wc;
        it_cq_get(cq, &wc);
        CHECK_EQ(wc.wr_id, 0xe1);
        if (wc.status != IBV_WC_REM_ACCESS_ERR && wc.status != IBV_WC_REM_INV_REQ_ERR)
            IT_FAIL("case %s: status %s (%d), expected a remote access error", names[c],
                    it_wc_status_str(wc.status), (int)wc.status);
        printf("case %s: %s\n", names[c], it_wc_status_str(wc.status));
        it_cq_expect_empty(cq);
        if (target != ra && target != rb) CHECK_OK(rpma_mr_remote_delete(&target));

        /* the queue pair is in error: even legal operations are flushed */
        CHECK_OK(rpma_write(conn, ra, 0, src, 0, LEN, RPMA_F_COMPLETION_ALWAYS, (void *)0xe2));
        CHECK_OK(rpma_read(conn, dst, 0, ra, 0, LEN, RPMA_F_COMPLETION_ALWAYS, (void *)0xe3));
        it_cq_expect_status(cq, 0xe2, IBV_WC_WR_FLUSH_ERR, names[c]);
        it_cq_expect_status(cq, 0xe3, IBV_WC_WR_FLUSH_ERR, names[c]);
        it_cq_expect_empty(cq);
    }
    CHECK_OK(rpma_mr_remote_delete(&ra));
    CHECK_OK(rpma_mr_remote_delete(&rb));

    CHECK_OK(rpma_conn_disconnect(conn));
    enum rpma_conn_event ev = it_next_event(conn);
    if (ev != RPMA_CONN_CLOSED && !(c != CASE_VALID && ev == RPMA_CONN_LOST))
        IT_FAIL("case %s: event %s after disconnect", names[c], rpma_utils_conn_event_2str(ev));
    CHECK_OK(rpma_conn_delete(&conn));
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *sbuf = it_alloc(LEN), *dbuf = it_alloc(LEN);
    it_fill(sbuf, LEN, SEED_NEW);
    struct rpma_mr_local *src = NULL, *dst = NULL;
    CHECK_OK(rpma_mr_reg(peer, sbuf, LEN, RPMA_MR_USAGE_WRITE_SRC, &src));
    CHECK_OK(rpma_mr_reg(peer, dbuf, LEN, RPMA_MR_USAGE_READ_DST, &dst));
    for (int c = 0; c < CASES; c++) run_case(a, peer, c, src, dst);
    CHECK_OK(rpma_mr_dereg(&src));
    CHECK_OK(rpma_mr_dereg(&dst));
    CHECK_OK(rpma_peer_delete(&peer));
    free(sbuf);
    free(dbuf);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
