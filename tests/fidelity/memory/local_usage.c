/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * local_usage.c -- local regions are checked as a NIC checks lkeys: a local write (a read's
 * destination, a receive buffer) needs a region of this peer registered with LOCAL_WRITE, which
 * upstream librpma asks for READ_DST, WRITE_SRC, WRITE_DST and RECV; a local read (a write's or
 * a send's source) needs only a region of this peer, whatever its usage.
 *
 * usage: local_usage PORT CASE
 *
 * One connection; the client uses a local region in one way:
 *   read_no_local_write  a read into a region registered READ_SRC | SEND | FLUSH_TYPE_VISIBILITY
 *   read_into_readonly   a read into read-only memory (mmap PROT_READ) registered
 *                        READ_SRC | SEND
 *   recv_no_local_write  a receive into a region registered READ_SRC | SEND; the server sends
 *   read_other_peer      a read into a region registered on another rpma_peer of the process
 *   write_other_peer     a write from a region registered on another peer
 *   send_other_peer      a send from a region registered on another peer
 *   recv_other_peer      a receive into a region registered on another peer; the server sends
 *   read_into_recv       a read into a region registered RECV
 *   recv_into_write_dst  a receive into a region registered READ_SRC | WRITE_DST; the server
 *                        sends (upstream's conn/rpma_send receives this way)
 *   write_from_read_dst  a write from a region registered READ_DST
 *   write_from_readonly  a write from read-only memory registered READ_SRC
 *   send_from_recv       a send from a region registered RECV
 *   send_from_write_src  a send from a region registered READ_DST | WRITE_SRC (as upstream's
 *                        conn/rpma_send sends)
 *   send_from_readonly   a send from read-only memory registered READ_SRC
 *   valid                the control: write, read and send through proper regions all succeed
 * The post call returns 0 in every case. Where a NIC refuses the region (the first seven):
 *   - the operation completes IBV_WC_LOC_PROT_ERR (a receive when a message arrives for it, and
 *     then the sender's send completes IBV_WC_REM_OP_ERR); rxe reports IBV_WC_LOC_QP_OP_ERR
 *     where its lkey lookup fails on the send or receive path, which RDMA allows as well;
 *   - the local region and the server's memory are untouched, and no receive at the server
 *     completes SUCCESS; the process does not crash;
 *   - the queue pair is then in the error state: a later legal read and write complete
 *     IBV_WC_WR_FLUSH_ERR.
 * Elsewhere the operation completes SUCCESS and moves its data, and the connection goes on: a
 * legal write, read and send (unless the case's send took the server's one receive) succeed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mem_common.h"

#define RLEN 4096
#define MSG 64
#define SEED_S 0x5eed5 /* the server's region */
#define SEED_Z 0x5eed6 /* the server's receive buffer */
#define SEED_Q 0x5eed7 /* what the server sends */
#define SEED_W 0x5eed8 /* what the client writes or sends */
#define SEED_Y 0x5eed9 /* the client's misused region */
#define WR_OP 10
#define WR_RECV 11
#define WR_LATE_READ 12
#define WR_LATE_WRITE 13
#define WR_LATE_SEND 14
#define WR_SRV_RECV 50
#define WR_SRV_SEND 60

enum kind { K_READ, K_WRITE, K_SEND, K_RECV, K_VALID };

struct ucase {
    const char *name;
    enum kind kind;
    int usage;       /* the region's usage */
    bool readonly;   /* mapped PROT_READ */
    bool other_peer; /* registered on the second peer */
    bool ok;         /* a NIC takes the region: the operation succeeds */
};

#define U(x) RPMA_MR_USAGE_##x
static const struct ucase CASES[] = {
    {"read_no_local_write", K_READ, U(READ_SRC) | U(SEND) | U(FLUSH_TYPE_VISIBILITY), false, false,
     false},
    {"read_into_readonly", K_READ, U(READ_SRC) | U(SEND), true, false, false},
    {"recv_no_local_write", K_RECV, U(READ_SRC) | U(SEND), false, false, false},
    {"read_other_peer", K_READ, U(READ_DST), false, true, false},
    {"write_other_peer", K_WRITE, U(WRITE_SRC), false, true, false},
    {"send_other_peer", K_SEND, U(SEND), false, true, false},
    {"recv_other_peer", K_RECV, U(RECV), false, true, false},
    {"read_into_recv", K_READ, U(RECV), false, false, true},
    {"recv_into_write_dst", K_RECV, U(READ_SRC) | U(WRITE_DST), false, false, true},
    {"write_from_read_dst", K_WRITE, U(READ_DST), false, false, true},
    {"write_from_readonly", K_WRITE, U(READ_SRC), true, false, true},
    {"send_from_recv", K_SEND, U(RECV), false, false, true},
    {"send_from_write_src", K_SEND, U(READ_DST) | U(WRITE_SRC), false, false, true},
    {"send_from_readonly", K_SEND, U(READ_SRC), true, false, true},
    {"valid", K_VALID, 0, false, false, true},
};
#undef U

#define WOFF (2 * MSG) /* where the case's write lands in the server's region */

static const char *g_port;
static const struct ucase *g_case;

static void server(int ctl, void *arg) {
    (void)arg;
    struct rpma_peer *peer = it_peer_new(MT_ADDR, true);
    char *rs = it_alloc(RLEN), *rb = it_alloc(RLEN), *sb = it_alloc(MSG);
    it_fill(rs, RLEN, SEED_S);
    it_fill(rb, RLEN, SEED_Z);
    it_fill(sb, MSG, SEED_Q);
    struct rpma_mr_local *mr_s = NULL, *mr_rb = NULL, *mr_sb = NULL;
    CHECK_OK(rpma_mr_reg(peer, rs, RLEN, RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST, &mr_s));
    CHECK_OK(rpma_mr_reg(peer, rb, RLEN, RPMA_MR_USAGE_RECV, &mr_rb));
    CHECK_OK(rpma_mr_reg(peer, sb, MSG, RPMA_MR_USAGE_SEND, &mr_sb));
    char desc[IT_MR_DESC_SIZE];
    CHECK_OK(rpma_mr_get_descriptor(mr_s, desc));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, MT_ADDR, g_port, &ep));
    struct rpma_conn_cfg *cfg = mt_cfg(8);
    mt_say(ctl, "READY");

    struct rpma_conn_req *req = it_next_req(ep, cfg);
    CHECK_OK(rpma_conn_req_recv(req, mr_rb, 0, RLEN, (void *)WR_SRV_RECV));
    struct rpma_conn *conn = it_accept(&req, desc, sizeof(desc));
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    int send_st = -2, recv_st = -1; /* -2: no send made, -1: no completion */
    if (g_case->kind == K_RECV) {
        CHECK_OK(rpma_send(conn, mr_sb, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_SRV_SEND));
        send_st = -1;
        long long until = it_now_ms() + 10000;
        struct ibv_wc wc;
        while (send_st == -1 && it_cq_next(cq, &wc, (int)(until - it_now_ms())))
            if (wc.wr_id == WR_SRV_SEND)
                send_st = (int)wc.status;
            else if (wc.wr_id == WR_SRV_RECV)
                recv_st = (int)wc.status;
    }
    char msg[MT_MSG];
    mt_expect(ctl, "DONE", msg, 30000);
    struct ibv_wc wc;
    while (recv_st == -1 && it_cq_next(cq, &wc, 300))
        if (wc.wr_id == WR_SRV_RECV) recv_st = (int)wc.status;
    enum rpma_conn_event ev = mt_next_event(conn, 15000);
    if (ev != RPMA_CONN_CLOSED && ev != RPMA_CONN_LOST)
        IT_FAIL("server: event %s", rpma_utils_conn_event_2str(ev));
    (void)rpma_conn_disconnect(conn);
    CHECK_OK(rpma_conn_delete(&conn));

    /*
     * Where the connection goes on, the client writes its 64 bytes at 0 and sends them, and the
     * case's write lands at WOFF, the case's send in the receive buffer; nothing else changes.
     */
    bool ok = g_case->ok;
    char *ref = it_alloc(RLEN);
    it_fill(ref, RLEN, SEED_S);
    if (ok) it_fill(ref, MSG, SEED_W);
    if (ok && g_case->kind == K_WRITE) it_fill(ref + WOFF, MSG, SEED_Y);
    bool rs_ok = memcmp(rs, ref, RLEN) == 0;
    it_fill(ref, RLEN, SEED_Z);
    if (ok) it_fill(ref, MSG, g_case->kind == K_SEND ? SEED_Y : SEED_W);
    bool rb_ok = memcmp(rb, ref, RLEN) == 0;
    mt_say(ctl, "REPORT %d %d %d %d", send_st, recv_st, rs_ok, rb_ok);
    free(ref);
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr_s));
    CHECK_OK(rpma_mr_dereg(&mr_rb));
    CHECK_OK(rpma_mr_dereg(&mr_sb));
    CHECK_OK(rpma_peer_delete(&peer));
    free(rs);
    free(rb);
    free(sb);
}

static int g_failures;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
    printf("FAIL %s: ", g_case->name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    g_failures++;
}

static int one_completion(struct rpma_cq *cq, uint64_t wr_id, int timeout_ms) {
    struct ibv_wc wc;
    if (!it_cq_next(cq, &wc, timeout_ms)) return -1;
    if (wc.wr_id != wr_id)
        IT_FAIL("%s: completion wr_id %llu, expected %llu", g_case->name,
                (unsigned long long)wc.wr_id, (unsigned long long)wr_id);
    return (int)wc.status;
}

static const char *st_name(int st) {
    return st < 0 ? "no completion" : mt_st((enum ibv_wc_status)st);
}

int main(int argc, char *argv[]) {
    const char *variant;
    mt_init(argc, argv, &g_port, &variant);
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++)
        if (strcmp(CASES[i].name, variant) == 0) g_case = &CASES[i];
    if (!g_case) {
        fprintf(stderr, "usage: %s PORT CASE (unknown case '%s')\n", argv[0], variant);
        return 2;
    }
    int ctl = -1;
    int pid = mt_spawn(server, NULL, &ctl);
    char msg[MT_MSG];
    mt_expect(ctl, "READY", msg, 20000);

    struct rpma_peer *peer = it_peer_new(MT_ADDR, false);
    struct rpma_peer *peer2 = it_peer_new(MT_ADDR, false);
    /* proper regions for the control case and the later operations */
    char *good = it_alloc(RLEN);
    it_fill(good, MSG, SEED_W);
    struct rpma_mr_local *mr_good = NULL;
    CHECK_OK(rpma_mr_reg(
        peer, good, RLEN,
        RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV,
        &mr_good));
    /* the misused region */
    char *bad = NULL;
    struct rpma_mr_local *mr_bad = NULL;
    long page = sysconf(_SC_PAGESIZE);
    if (g_case->kind != K_VALID) {
        bad = mt_map((size_t)page);
        it_fill(bad, (size_t)page, SEED_Y);
        if (g_case->readonly && mprotect(bad, (size_t)page, PROT_READ) != 0)
            IT_FAIL("mprotect: %s", strerror(errno));
        CHECK_OK(rpma_mr_reg(g_case->other_peer ? peer2 : peer, bad, (size_t)page, g_case->usage,
                             &mr_bad));
    }
    struct rpma_conn_cfg *cfg = mt_cfg(8);
    struct rpma_conn *conn = it_connect(peer, MT_ADDR, g_port, cfg, NULL, 0);
    struct rpma_mr_remote *remote = it_remote_mr(conn, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    int ret = 0, st = -1;
    const char *post = "";
    switch (g_case->kind) {
        case K_READ:
            post = "rpma_read";
            ret =
                rpma_read(conn, mr_bad, 0, remote, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_OP);
            break;
        case K_WRITE:
            post = "rpma_write";
            ret = rpma_write(conn, remote, WOFF, mr_bad, 0, MSG, RPMA_F_COMPLETION_ALWAYS,
                             (void *)WR_OP);
            break;
        case K_SEND:
            post = "rpma_send";
            ret = rpma_send(conn, mr_bad, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_OP);
            break;
        case K_RECV:
            post = "rpma_recv";
            ret = rpma_recv(conn, mr_bad, 0, MSG, (void *)WR_RECV);
            break;
        case K_VALID:
            break;
    }
    if (ret != 0) {
        printf(
            "FAIL %s: %s returned %d (%s); the post must succeed (a NIC checks the lkey when "
            "it executes)\n",
            g_case->name, post, ret, rpma_err_2str(ret));
        g_failures++;
    } else if (g_case->kind != K_VALID) {
        st = one_completion(cq, g_case->kind == K_RECV ? WR_RECV : WR_OP, 10000);
        printf("%s: %s completed %s\n", g_case->name, post, st_name(st));
        int want = g_case->ok ? IBV_WC_SUCCESS : IBV_WC_LOC_PROT_ERR;
        bool as_want = st == want || (!g_case->ok && mt_is_local_prot((enum ibv_wc_status)st));
        if (!as_want) fail("completion %s, expected %s", st_name(st), st_name(want));
    }

    int late_r = -1, late_w = -1;
    if (g_case->ok && ret == 0) {
        char *ref = it_alloc(RLEN);
        it_fill(ref, RLEN, SEED_S);
        CHECK_OK(rpma_write(conn, remote, 0, mr_good, 0, MSG, RPMA_F_COMPLETION_ALWAYS,
                            (void *)WR_LATE_WRITE));
        CHECK_OK(rpma_read(conn, mr_good, 2 * MSG, remote, MSG, MSG, RPMA_F_COMPLETION_ALWAYS,
                           (void *)WR_LATE_READ));
        /* the server posts one receive: a case's send took it */
        bool send = g_case->kind != K_SEND;
        if (send)
            CHECK_OK(
                rpma_send(conn, mr_good, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_LATE_SEND));
        late_w = one_completion(cq, WR_LATE_WRITE, 10000);
        late_r = one_completion(cq, WR_LATE_READ, 10000);
        st = send ? one_completion(cq, WR_LATE_SEND, 10000) : IBV_WC_SUCCESS;
        printf("%s: then write %s, read %s, send %s\n", g_case->name, st_name(late_w),
               st_name(late_r), send ? st_name(st) : "-");
        if (late_w != IBV_WC_SUCCESS || late_r != IBV_WC_SUCCESS || st != IBV_WC_SUCCESS)
            fail("%s", "a legal operation failed");
        else if (memcmp(good + 2 * MSG, ref + MSG, MSG) != 0)
            fail("%s", "the read returned wrong data");
        free(ref);
    } else if (ret == 0) {
        /* the queue pair is in the error state now */
        CHECK_OK(rpma_read(conn, mr_good, 0, remote, 0, MSG, RPMA_F_COMPLETION_ALWAYS,
                           (void *)WR_LATE_READ));
        late_r = one_completion(cq, WR_LATE_READ, 10000);
        CHECK_OK(rpma_write(conn, remote, 0, mr_good, 0, MSG, RPMA_F_COMPLETION_ALWAYS,
                            (void *)WR_LATE_WRITE));
        late_w = one_completion(cq, WR_LATE_WRITE, 10000);
        printf("%s: later read %s, later write %s\n", g_case->name, st_name(late_r),
               st_name(late_w));
        /* rxe reports a receive's error before its responder moves the queue pair to the
         * error state, so a post right after that completion may still succeed there (the
         * reference shows the same): on a NIC only a failure other than the flush is wrong */
        bool racy = it_nic() && g_case->kind == K_RECV;
        bool ok_r = late_r == IBV_WC_WR_FLUSH_ERR || (racy && late_r == IBV_WC_SUCCESS);
        bool ok_w = late_w == IBV_WC_WR_FLUSH_ERR || (racy && late_w == IBV_WC_SUCCESS);
        if (!ok_r || !ok_w)
            fail("%s", "operations after the error must complete WR_FLUSH_ERR");
    }
    mt_say(ctl, "DONE");
    enum rpma_conn_event ev = mt_close(&conn, 15000);
    CHECK_OK(rpma_mr_remote_delete(&remote));

    int send_st = -2, recv_st = -1, rs_ok = 0, rb_ok = 0;
    const char *rep = mt_expect(ctl, "REPORT", msg, 30000);
    if (sscanf(rep, "%d %d %d %d", &send_st, &recv_st, &rs_ok, &rb_ok) != 4)
        IT_FAIL("bad report '%s'", rep);
    printf("%s: server: send %s, receive %s, region %s, receive buffer %s; connection %s\n",
           g_case->name, send_st == -2 ? "-" : st_name(send_st), st_name(recv_st),
           rs_ok ? "as expected" : "NOT as expected", rb_ok ? "as expected" : "NOT as expected",
           rpma_utils_conn_event_2str(ev));
    int want_send = g_case->ok ? IBV_WC_SUCCESS : IBV_WC_REM_OP_ERR;
    if (g_case->kind == K_RECV && send_st != want_send)
        fail("the server's send completed %s, expected %s", st_name(send_st), st_name(want_send));
    if (g_case->ok && recv_st != IBV_WC_SUCCESS)
        fail("the server's receive completed %s, expected SUCCESS", st_name(recv_st));
    if (!g_case->ok && recv_st == IBV_WC_SUCCESS)
        fail("%s", "the server's receive completed SUCCESS");
    if (!rs_ok) fail("%s", "the server's region is not as expected");
    if (!rb_ok) fail("%s", "the server's receive buffer is not as expected");
    if (bad) {
        /* only a read or receive that a NIC takes writes the region: its first MSG bytes */
        char *want = it_alloc((size_t)page);
        it_fill(want, (size_t)page, SEED_Y);
        if (g_case->ok && g_case->kind == K_READ) it_fill(want, MSG, SEED_S);
        if (g_case->ok && g_case->kind == K_RECV) it_fill(want, MSG, SEED_Q);
        if (memcmp(bad, want, (size_t)page) != 0) fail("%s", "the local region is not as expected");
        free(want);
    }

    if (mr_bad) CHECK_OK(rpma_mr_dereg(&mr_bad));
    CHECK_OK(rpma_mr_dereg(&mr_good));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_peer_delete(&peer2));
    CHECK_OK(rpma_peer_delete(&peer));
    if (bad) mt_unmap(bad, (size_t)page);
    free(good);
    mt_reap(pid, 10000);
    if (g_failures) IT_FAIL("%s: %d check(s) failed", g_case->name, g_failures);
    printf("%s: PASS\n", g_case->name);
    return 0;
}
