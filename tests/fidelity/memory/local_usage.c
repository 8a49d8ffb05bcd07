/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * local_usage.c -- local regions are checked as a NIC checks lkeys.
 *
 * usage: local_usage PORT CASE
 *
 * One connection; the client uses a local region it must not use that way:
 *   read_no_read_dst    a read into a region registered WRITE_SRC only
 *   read_into_readonly  a read into read-only memory (mmap PROT_READ) registered
 *                       READ_SRC | SEND
 *   recv_no_recv_usage  a receive into a region registered SEND only; the server sends to it
 *   write_no_write_src  a write from a region registered READ_DST only
 *   send_no_send_usage  a send from a region registered RECV only
 *   read_other_peer     a read into a region registered on another rpma_peer of the process
 *   write_other_peer    a write from a region registered on another peer
 *   send_other_peer     a send from a region registered on another peer
 *   recv_other_peer     a receive into a region registered on another peer; the server sends
 *   valid               the control: write, read and send through proper regions all succeed
 * As on a NIC:
 *   - the post call returns 0; the operation completes IBV_WC_LOC_PROT_ERR (a receive when a
 *     message arrives for it, and then the sender's send completes IBV_WC_REM_OP_ERR);
 *   - the local region and the server's memory are untouched, and no receive at the server
 *     completes SUCCESS; the process does not crash;
 *   - the queue pair is then in the error state: a later legal read and write complete
 *     IBV_WC_WR_FLUSH_ERR.
 */
#define _GNU_SOURCE
#include <errno.h>
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
#define WR_SRV_RECV 50
#define WR_SRV_SEND 60

enum kind { K_READ, K_WRITE, K_SEND, K_RECV, K_VALID };

struct ucase {
    const char *name;
    enum kind kind;
    int usage;       /* the misused region's usage */
    bool readonly;   /* mapped PROT_READ */
    bool other_peer; /* registered on the second peer */
};

static const struct ucase CASES[] = {
    {"read_no_read_dst", K_READ, RPMA_MR_USAGE_WRITE_SRC, false, false},
    {"read_into_readonly", K_READ, RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_SEND, true, false},
    {"recv_no_recv_usage", K_RECV, RPMA_MR_USAGE_SEND, false, false},
    {"write_no_write_src", K_WRITE, RPMA_MR_USAGE_READ_DST, false, false},
    {"send_no_send_usage", K_SEND, RPMA_MR_USAGE_RECV, false, false},
    {"read_other_peer", K_READ, RPMA_MR_USAGE_READ_DST, false, true},
    {"write_other_peer", K_WRITE, RPMA_MR_USAGE_WRITE_SRC, false, true},
    {"send_other_peer", K_SEND, RPMA_MR_USAGE_SEND, false, true},
    {"recv_other_peer", K_RECV, RPMA_MR_USAGE_RECV, false, true},
    {"valid", K_VALID, 0, false, false},
};

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

    /* the valid case writes its 64 bytes at 0 and sends them; nothing else may change */
    bool valid = g_case->kind == K_VALID;
    char *ref = it_alloc(RLEN);
    it_fill(ref, RLEN, SEED_S);
    if (valid) it_fill(ref, MSG, SEED_W);
    bool rs_ok = memcmp(rs, ref, RLEN) == 0;
    it_fill(ref, RLEN, SEED_Z);
    if (valid) it_fill(ref, MSG, SEED_W);
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

static void fail(const char *fmt, const char *what) {
    printf("FAIL %s: ", g_case->name);
    printf(fmt, what);
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
            ret = rpma_write(conn, remote, 0, mr_bad, 0, MSG, RPMA_F_COMPLETION_ALWAYS,
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
            "FAIL %s: %s returned %d (%s); the post must succeed and the operation complete "
            "with an error\n",
            g_case->name, post, ret, rpma_err_2str(ret));
        g_failures++;
    } else if (g_case->kind != K_VALID) {
        st = one_completion(cq, g_case->kind == K_RECV ? WR_RECV : WR_OP, 10000);
        printf("%s: %s completed %s\n", g_case->name, post, st_name(st));
        if (st != IBV_WC_LOC_PROT_ERR) fail("completion %s, expected LOC_PROT_ERR", st_name(st));
    }

    int late_r = -1, late_w = -1;
    if (g_case->kind == K_VALID) {
        char *ref = it_alloc(RLEN);
        it_fill(ref, RLEN, SEED_S);
        CHECK_OK(rpma_write(conn, remote, 0, mr_good, 0, MSG, RPMA_F_COMPLETION_ALWAYS,
                            (void *)WR_LATE_WRITE));
        CHECK_OK(rpma_read(conn, mr_good, 2 * MSG, remote, MSG, MSG, RPMA_F_COMPLETION_ALWAYS,
                           (void *)WR_LATE_READ));
        CHECK_OK(rpma_send(conn, mr_good, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_OP));
        late_w = one_completion(cq, WR_LATE_WRITE, 10000);
        late_r = one_completion(cq, WR_LATE_READ, 10000);
        st = one_completion(cq, WR_OP, 10000);
        printf("valid: write %s, read %s, send %s\n", st_name(late_w), st_name(late_r),
               st_name(st));
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
        if (late_r != IBV_WC_WR_FLUSH_ERR || late_w != IBV_WC_WR_FLUSH_ERR)
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
           rs_ok ? "as expected" : "CHANGED", rb_ok ? "as expected" : "CHANGED",
           rpma_utils_conn_event_2str(ev));
    if (g_case->kind == K_RECV && send_st != IBV_WC_REM_OP_ERR)
        fail("the server's send completed %s, expected REM_OP_ERR", st_name(send_st));
    if (g_case->kind == K_VALID && recv_st != IBV_WC_SUCCESS)
        fail("the server's receive completed %s, expected SUCCESS", st_name(recv_st));
    if (g_case->kind != K_VALID && recv_st == IBV_WC_SUCCESS)
        fail("%s", "the server's receive completed SUCCESS");
    if (!rs_ok) fail("%s", "the server's region changed");
    if (!rb_ok) fail("%s", "the server's receive buffer changed");
    if (bad && !mt_is_pattern(bad, (size_t)page, SEED_Y))
        fail("%s", "the misused local region was written");

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
