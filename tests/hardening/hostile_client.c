/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hostile_client.c -- attacks a hostile_server over raw TCP, then proves that it still serves.
 *
 * usage: hostile_client ADDR PORT CASE
 *
 * Every case runs the same frame: a legitimate librpma client connects and does a verified
 * write + read + flush, and asks the server for its counters and a memory check ("pre"); the case
 * attacks; then a legitimate client again does verified I/O and asks until every hostile
 * connection is gone and the server holds no more file descriptors than before ("post"). Passing
 * needs: the server answered, its memory outside the windows clients may write is unchanged
 * (guards and read-only region included), and exactly the expected number of hostile connection
 * requests surfaced, each of them ending LOST.
 *
 * CASE "quit" only asks the server to exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "hostile_proto.h"
#include "wire.h"

static const char *g_addr, *g_port;

/*
 * KNOWN LIBRARY BUG (reported, src/ untouched): a connection request whose first stream sent a
 * complete Hello but whose second stream never comes is held by the listener (socket open, file
 * descriptor used) until some later connection attempt happens to fire the listener's timer more
 * than 10 s afterwards; with no further traffic it is held forever. Cases run with the argument
 * "xfail_half_open" pass while that bug shows and fail once it is fixed ("XPASS"), so that the
 * marker gets removed then; anything else going wrong still fails them.
 */
static bool g_xfail_half_open;
static bool g_half_open_bug_seen;

static void half_open_bug(const char *what) {
    if (!g_xfail_half_open) IT_FAIL("%s", what);
    printf("KNOWN BUG (expected failure): %s\n", what);
    g_half_open_bug_seen = true;
}

/* ------------------------------------------------------------------ the legitimate client */

#define L_SRC 0
#define L_DST 4096
#define L_SEND 8192
#define L_RECV (8192 + 64)
#define L_SIZE (8192 + 128)

struct legit {
    struct rpma_peer *peer;
    struct rpma_conn *conn;
    struct rpma_cq *cq;
    struct rpma_mr_local *mr;
    struct rpma_mr_remote *remote;
    char *buf;
};

static void legit_open(struct legit *l) {
    memset(l, 0, sizeof(*l));
    l->peer = it_peer_new(g_addr, false);
    l->buf = it_alloc(L_SIZE);
    CHECK_OK(rpma_mr_reg(
        l->peer, l->buf, L_SIZE,
        RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV,
        &l->mr));
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, 16));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, 32));
    l->conn = it_connect(l->peer, g_addr, g_port, cfg, NULL, 0);
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    l->remote = it_remote_mr(l->conn, HS_OFF_MR);
    it_apply_remote_pcfg(l->conn, HS_OFF_PCFG);
    CHECK_OK(rpma_conn_get_cq(l->conn, &l->cq));
}

/* write a fresh pattern into the legit window, make it persistent, read it back, compare */
static void legit_io(struct legit *l) {
    uint64_t seed = w_random64();
    it_fill(l->buf + L_SRC, HS_LEGIT, seed);
    memset(l->buf + L_DST, 0, HS_LEGIT);
    CHECK_OK(rpma_write(l->conn, l->remote, 0, l->mr, L_SRC, HS_LEGIT, RPMA_F_COMPLETION_ALWAYS,
                        (void *)1));
    it_cq_expect(l->cq, IBV_WC_RDMA_WRITE, (void *)1);
    CHECK_OK(rpma_flush(l->conn, l->remote, 0, HS_LEGIT, RPMA_FLUSH_TYPE_PERSISTENT,
                        RPMA_F_COMPLETION_ALWAYS, (void *)2));
    it_cq_expect(l->cq, IBV_WC_RDMA_READ, (void *)2);
    CHECK_OK(rpma_read(l->conn, l->mr, L_DST, l->remote, 0, HS_LEGIT, RPMA_F_COMPLETION_ALWAYS,
                       (void *)3));
    it_cq_expect(l->cq, IBV_WC_RDMA_READ, (void *)3);
    long bad = it_verify(l->buf + L_DST, HS_LEGIT, seed);
    if (bad >= 0) IT_FAIL("legit read-back differs at %ld", bad);
}

static void legit_cmd(struct legit *l, const char *cmd, struct hs_stats *st) {
    memset(l->buf + L_SEND, 0, HS_MSG_LEN);
    memset(l->buf + L_RECV, 0, HS_MSG_LEN);
    snprintf(l->buf + L_SEND, HS_MSG_LEN, "%s", cmd);
    CHECK_OK(rpma_recv(l->conn, l->mr, L_RECV, HS_MSG_LEN, (void *)10));
    CHECK_OK(rpma_send(l->conn, l->mr, L_SEND, HS_MSG_LEN, RPMA_F_COMPLETION_ALWAYS, (void *)11));
    enum ibv_wc_opcode ops[2] = {IBV_WC_RECV, IBV_WC_SEND};
    uintptr_t ctx[2] = {10, 11};
    it_cq_expect_set(l->cq, 2, ops, ctx, NULL);
    char line[HS_MSG_LEN + 1];
    memcpy(line, l->buf + L_RECV, HS_MSG_LEN);
    line[HS_MSG_LEN] = '\0';
    if (hs_stats_parse(line, st) != 0) IT_FAIL("cannot parse the server's answer '%s'", line);
    if (!st->ok) IT_FAIL("server memory check failed: '%s'", line);
}

static void legit_close(struct legit *l) {
    it_disconnect_active(&l->conn);
    CHECK_OK(rpma_mr_remote_delete(&l->remote));
    CHECK_OK(rpma_mr_dereg(&l->mr));
    CHECK_OK(rpma_peer_delete(&l->peer));
    free(l->buf);
}

/*
 * A legitimate session: verified I/O, then CHECK until no hostile connection is left and the
 * server holds at most max_fds descriptors (max_fds < 0: any), within wait_ms.
 */
static struct hs_stats legit_session(int max_fds, int wait_ms) {
    struct legit l;
    struct hs_stats st;
    legit_open(&l);
    legit_io(&l);
    long long deadline = it_now_ms() + wait_ms;
    for (;;) {
        legit_cmd(&l, "CHECK", &st);
        if (st.live == 1 && (max_fds < 0 || st.fds <= max_fds)) break;
        if (it_now_ms() > deadline) {
            char msg[160];
            snprintf(msg, sizeof(msg),
                     "server still has %d connections and %d descriptors (at most %d expected) "
                     "after %d ms",
                     st.live, st.fds, max_fds, wait_ms);
            if (st.live != 1) IT_FAIL("%s", msg);
            half_open_bug(msg); /* only descriptors held: the half-open streams */
            break;
        }
        usleep(200 * 1000);
    }
    legit_io(&l);
    legit_close(&l);
    return st;
}

/* ------------------------------------------------------------------ raw helpers */

/* the server must close fd within ms; returns how long it took */
static long expect_closed(int fd, int ms, const char *what) {
    long t = w_wait_closed(fd, ms);
    if (t < 0) IT_FAIL("%s: the server kept the stream open for more than %d ms", what, ms);
    return t;
}

static int raw_connect(void) {
    int fd = w_connect(g_addr, g_port, 2000);
    if (fd < 0) IT_FAIL("raw connect: %s", strerror(errno));
    return fd;
}

/* the answer on the main stream within ms: 1, or 0 if the stream closed, -1 on timeout */
static int read_answer(struct w_conn *c, struct w_frame *f, int ms) {
    return w_frame_recv(c->main_fd, f, ms);
}

static void expect_nak(struct w_conn *c, uint64_t seq, uint16_t status, const char *what) {
    struct w_frame f;
    int r = read_answer(c, &f, 3000);
    if (r != 1) IT_FAIL("%s: no answer (%s)", what, r < 0 ? "timeout" : "stream closed");
    if (f.op != W_OP_NAK || f.aux != seq || f.status != status)
        IT_FAIL("%s: answer op %u status %u seq %llu, expected NAK status %u seq %llu", what, f.op,
                f.status, (unsigned long long)f.aux, status, (unsigned long long)seq);
}

static void expect_ack(struct w_conn *c, uint64_t seq, const char *what) {
    struct w_frame f;
    int r = read_answer(c, &f, 3000);
    if (r != 1) IT_FAIL("%s: no answer (%s)", what, r < 0 ? "timeout" : "stream closed");
    if (f.op != W_OP_ACK || f.aux != seq)
        IT_FAIL("%s: answer op %u status %u seq %llu, expected ACK seq %llu", what, f.op, f.status,
                (unsigned long long)f.aux, (unsigned long long)seq);
}

/* both streams of a connection must be closed by the server within ms */
static void expect_conn_closed(struct w_conn *c, int ms, const char *what) {
    expect_closed(c->main_fd, ms, what);
    expect_closed(c->join_fd, ms, what);
    w_conn_close(c);
}

/* ------------------------------------------------------------------ cases */
/* each returns the number of hostile connection requests the server must have seen */

/* random bytes instead of a Hello: full-size and longer ones are refused at once */
static int case_random_hello(void) {
    for (int i = 0; i < 20; i++) {
        int fd = raw_connect();
        uint8_t junk[400];
        size_t n = 80 + (size_t)(w_random64() % 320);
        w_random(junk, n);
        junk[0] = (uint8_t) ~(W_MAGIC & 0xff); /* never the magic by chance */
        CHECK(w_send_all(fd, junk, n));
        expect_closed(fd, 2000, "random Hello");
        close(fd);
    }
    return 0;
}

/* an incomplete Hello and silence: dropped by the listener's Hello timeout (5 s) */
static int case_short_hello_stall(void) {
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = raw_connect();
        struct w_hello h;
        w_hello_init(&h, W_ROLE_MAIN, w_random64());
        CHECK(w_send_all(fds[i], &h, (size_t)(10 + 30 * i)));
    }
    for (int i = 0; i < 3; i++) {
        long t = expect_closed(fds[i], 5000 + 3000, "stalled Hello");
        printf("stalled Hello %d closed by the server after %ld ms\n", i, t);
        close(fds[i]);
    }
    return 0;
}

/* a valid Hello, then garbage: on the main stream before the join, after the reply, on join */
static int case_hello_then_garbage(void) {
    uint8_t junk[256];
    for (int variant = 0; variant < 3; variant++) {
        w_random(junk, sizeof(junk));
        junk[0] = 0x77; /* an opcode no one defines, so the first header is already wrong */
        struct w_conn c;
        if (variant == 0) {
            /* garbage right behind the main Hello, in the same segment */
            uint64_t token = w_random64();
            uint8_t buf[80 + sizeof(junk)];
            struct w_hello h;
            w_hello_init(&h, W_ROLE_MAIN, token);
            memcpy(buf, &h, 80);
            memcpy(buf + 80, junk, sizeof(junk));
            memset(&c, 0, sizeof(c));
            c.main_fd = raw_connect();
            CHECK(w_send_all(c.main_fd, buf, sizeof(buf)));
            c.join_fd = raw_connect();
            w_hello_init(&h, W_ROLE_JOIN, token);
            CHECK(w_send_all(c.join_fd, &h, 80));
            int r = w_recv_exact(c.main_fd, &c.reply, sizeof(c.reply), 3000);
            /* accepted then lost, or closed before the reply: both are fine */
            if (r == 1) CHECK_EQ(c.reply.kind, W_REPLY_ACCEPT);
        } else {
            w_conn_open(&c, g_addr, g_port);
            CHECK(w_send_all(variant == 1 ? c.main_fd : c.join_fd, junk, sizeof(junk)));
        }
        expect_conn_closed(&c, 3000, "garbage after the Hello");
    }
    return 3;
}

/* length fields out of bounds: in Hellos (refused), in frames (connection lost) */
static int case_huge_lengths(void) {
    struct {
        uint8_t pdata_len;
        uint16_t version;
        uint8_t role;
    } bad[] = {
        {255, W_VERSION, W_ROLE_MAIN},
        {57, W_VERSION, W_ROLE_MAIN},
        {0, 0, W_ROLE_MAIN},
        {0, W_VERSION + 1, W_ROLE_MAIN},
        {0, W_VERSION - 1, W_ROLE_MAIN}, /* version 1: 32-byte headers, no acks */
        {0, W_VERSION, 0},
        {0, W_VERSION, 3},
        {200, W_VERSION, W_ROLE_JOIN},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int fd = raw_connect();
        struct w_hello h;
        w_hello_init(&h, bad[i].role, w_random64());
        h.pdata_len = bad[i].pdata_len;
        /* relative to the version spoken (RPMA_TEST_WIRE_VERSION, see wire.h) */
        h.version = (uint16_t)(bad[i].version - W_VERSION + w_version());
        CHECK(w_send_all(fd, &h, sizeof(h)));
        expect_closed(fd, 2000, "malformed Hello");
        close(fd);
    }
    /* frames whose length exceeds the 1 GiB limit: no NAK, the connection ends */
    uint32_t lens[] = {0xffffffffu, W_MAX_LEN + 1};
    uint8_t ops[] = {W_OP_WRITE, W_OP_READ, W_OP_SEND};
    int n = 0;
    for (size_t o = 0; o < sizeof(ops); o++)
        for (size_t k = 0; k < 2; k++) {
            struct w_conn c;
            w_conn_open(&c, g_addr, g_port);
            CHECK(w_frame_send(c.main_fd, ops[o], W_FLAG_ACK_REQ, lens[k], c.mr.rkey, c.mr.addr, 0,
                               NULL, 0));
            expect_conn_closed(&c, 3000, "frame length over the limit");
            n++;
        }
    /* an answer frame (client's join stream) with a huge length for a request never sent */
    struct w_conn c;
    w_conn_open(&c, g_addr, g_port);
    CHECK(w_frame_send(c.join_fd, W_OP_READ_RESP, 0, 0xfffffff0u, 0, 0, 1, NULL, 0));
    expect_conn_closed(&c, 3000, "answer length over the limit");
    return n + 1;
}

/* half handshakes: one stream only, or a Hello cut in the middle, then close */
static int case_half_handshake(void) {
    for (int variant = 0; variant < 5; variant++) {
        uint64_t token = w_random64();
        struct w_hello h;
        int a = raw_connect(), b = -1;
        switch (variant) {
            case 0: /* the main stream only */
                w_hello_init(&h, W_ROLE_MAIN, token);
                CHECK(w_send_all(a, &h, 80));
                break;
            case 1: /* the join stream only */
                w_hello_init(&h, W_ROLE_JOIN, token);
                CHECK(w_send_all(a, &h, 80));
                break;
            case 2: /* the main Hello cut in the middle */
                w_hello_init(&h, W_ROLE_MAIN, token);
                CHECK(w_send_all(a, &h, 40));
                break;
            case 3: /* a full main Hello, the join Hello cut */
                w_hello_init(&h, W_ROLE_MAIN, token);
                CHECK(w_send_all(a, &h, 80));
                b = raw_connect();
                w_hello_init(&h, W_ROLE_JOIN, token);
                CHECK(w_send_all(b, &h, 50));
                break;
            case 4: /* two main streams with one token: the second is a duplicate */
                w_hello_init(&h, W_ROLE_MAIN, token);
                CHECK(w_send_all(a, &h, 80));
                b = raw_connect();
                CHECK(w_send_all(b, &h, 80));
                expect_closed(b, 2000, "duplicate main stream");
                break;
        }
        usleep(50 * 1000);
        if (variant % 2)
            w_close_rst(a);
        else
            close(a);
        if (b >= 0) close(b);
    }
    return 0;
}

/* a lone main stream that never gets its join and stays open: the server must let it go */
static int case_lone_half_stream(void) {
    int fd = raw_connect();
    struct w_hello h;
    w_hello_init(&h, W_ROLE_MAIN, w_random64());
    CHECK(w_send_all(fd, &h, 80));
    /* the listener's limit is 5 s per Hello; the pairing is allowed as long again */
    long t = w_wait_closed(fd, 10000 + 4000);
    if (t < 0)
        half_open_bug("a lone main stream is still open after 14000 ms");
    else
        printf("lone main stream closed by the server after %ld ms\n", t);
    close(fd);
    return 0;
}

/*
 * frames with opcodes that are not allowed on the stream they arrive on, answers to nothing, and
 * requests acknowledging requests never sent
 */
static int case_bad_opcodes(void) {
    static const uint8_t on_main[] = {0,        8,  15, W_OP_ACK, W_OP_READ_RESP,
                                      W_OP_NAK, 31, 33, 64,       255};
    static const uint8_t on_join[] = {0, W_OP_WRITE, W_OP_READ, W_OP_SEND, 19, 255};
    int n = 0;
    for (size_t i = 0; i < sizeof(on_main); i++, n++) {
        struct w_conn c;
        w_conn_open(&c, g_addr, g_port);
        CHECK(w_frame_send(c.main_fd, on_main[i], W_FLAG_ACK_REQ, 16, c.mr.rkey,
                           c.mr.addr + HS_LEGIT, 1, "0123456789abcdef", 16));
        expect_conn_closed(&c, 3000, "bad opcode on the request stream");
    }
    for (size_t i = 0; i < sizeof(on_join); i++, n++) {
        struct w_conn c;
        w_conn_open(&c, g_addr, g_port);
        CHECK(
            w_frame_send(c.join_fd, on_join[i], 0, 0, c.mr.rkey, c.mr.addr + HS_LEGIT, 1, NULL, 0));
        expect_conn_closed(&c, 3000, "bad opcode on the answer stream");
    }
    /* well-formed answers to requests the server never sent */
    static const uint8_t answers[] = {W_OP_ACK, W_OP_NAK, W_OP_READ_RESP};
    for (size_t i = 0; i < sizeof(answers); i++, n++) {
        struct w_conn c;
        w_conn_open(&c, g_addr, g_port);
        CHECK(w_frame_send(c.join_fd, answers[i], 0, 0, 0, 0, 7, NULL, 0));
        expect_conn_closed(&c, 3000, "an answer to nothing");
    }
    /*
     * Version 2: a request whose ack field acknowledges requests the server never sent (it sent
     * none on a fresh connection). Positive control: bad_requests sends ack 0 on every request.
     */
    if (w_version() >= 2) {
        static const uint64_t acks[] = {1, 2, 0x8000000000000000ull, UINT64_MAX};
        static const uint8_t ops[] = {W_OP_WRITE, W_OP_READ, W_OP_FLUSH, W_OP_SEND};
        for (size_t i = 0; i < sizeof(acks) / sizeof(acks[0]); i++, n++) {
            struct w_conn c;
            w_conn_open(&c, g_addr, g_port);
            struct w_frame f = {.op = ops[i],
                                .flags = W_FLAG_ACK_REQ,
                                .length = ops[i] == W_OP_FLUSH ? 0 : 16,
                                .rkey = c.mr.rkey,
                                .addr = c.mr.addr + HS_LEGIT,
                                .ack = acks[i]};
            bool payload = ops[i] == W_OP_WRITE || ops[i] == W_OP_SEND;
            CHECK(w_frame_send_hdr(c.main_fd, &f, "0123456789abcdef", payload ? 16 : 0));
            struct w_frame a;
            int r = read_answer(&c, &a, 3000);
            if (r == 1)
                IT_FAIL("a request acknowledging %llu requests never sent was answered (op %u)",
                        (unsigned long long)acks[i], a.op);
            expect_conn_closed(&c, 3000, "an acknowledgement of requests never sent");
        }
    }
    return n;
}

/* frames cut short, then close (or stall, then close) */
static int case_truncated_frames(void) {
    uint8_t payload[1000];
    w_random(payload, sizeof(payload));
    int n = 0;
    for (int variant = 0; variant < 4; variant++, n++) {
        struct w_conn c;
        w_conn_open(&c, g_addr, g_port);
        struct w_frame f = {.op = W_OP_WRITE,
                            .flags = W_FLAG_ACK_REQ,
                            .length = sizeof(payload),
                            .rkey = c.mr.rkey,
                            .addr = c.mr.addr + HS_LEGIT};
        size_t hl = w_header_size();
        switch (variant) {
            case 0: /* half a header */
                CHECK(w_send_all(c.main_fd, &f, hl / 2));
                break;
            case 1: /* a whole header, half the payload: that half may land in the scratch window */
                CHECK(w_send_all(c.main_fd, &f, hl));
                CHECK(w_send_all(c.main_fd, payload, 500));
                break;
            case 2: /* the same, with a pause before the close */
                CHECK(w_send_all(c.main_fd, &f, hl));
                CHECK(w_send_all(c.main_fd, payload, 10));
                usleep(300 * 1000);
                break;
            case 3: /* a read request cut short */
                f.op = W_OP_READ;
                CHECK(w_send_all(c.main_fd, &f, hl - 1));
                break;
        }
        if (variant == 1)
            w_close_rst(c.main_fd);
        else
            close(c.main_fd);
        c.main_fd = -1;
        expect_closed(c.join_fd, 3000, "truncated frame");
        w_conn_close(&c);
    }
    return n;
}

/* requests naming bad regions, ranges or sizes: each one is NAKed and touches nothing */
static int case_bad_requests(void) {
    int n = 0;
    uint8_t payload[64];
    w_random(payload, sizeof(payload));
    struct w_conn c;

    /* positive control first: the raw client speaks the protocol correctly */
    w_conn_open(&c, g_addr, g_port);
    uint64_t scratch = c.mr.addr + HS_LEGIT;
    CHECK(w_frame_send(c.main_fd, W_OP_WRITE, W_FLAG_ACK_REQ, 64, c.mr.rkey, scratch, 0, payload,
                       64));
    expect_ack(&c, 1, "valid write");
    CHECK(w_frame_send(c.main_fd, W_OP_READ, W_FLAG_ACK_REQ, 64, c.mr.rkey, scratch, 0, NULL, 0));
    struct w_frame f;
    CHECK_EQ(read_answer(&c, &f, 3000), 1);
    CHECK_EQ(f.op, W_OP_READ_RESP);
    CHECK_EQ(f.aux, 2);
    CHECK_EQ(f.length, 64);
    uint8_t back[64];
    CHECK_EQ(w_recv_exact(c.main_fd, back, 64, 3000), 1);
    CHECK(memcmp(back, payload, 64) == 0);
    CHECK(w_frame_send(c.main_fd, W_OP_ATOMIC, W_FLAG_ACK_REQ, 8, c.mr.rkey, scratch + 64,
                       0x1122334455667788ull, NULL, 0));
    expect_ack(&c, 3, "valid atomic write");
    CHECK(w_frame_send(c.main_fd, W_OP_FLUSH, W_FLAG_ACK_REQ | W_FLAG_PERSISTENT, 128, c.mr.rkey,
                       scratch, 0, NULL, 0));
    expect_ack(&c, 4, "valid flush");
    /* zero-byte operations name no region: any rkey and address will do */
    CHECK(w_frame_send(c.main_fd, W_OP_WRITE, W_FLAG_ACK_REQ, 0, 0xdeadbeef, 1, 0, NULL, 0));
    expect_ack(&c, 5, "zero-byte write");
    w_conn_close(&c);
    n++;

    uint32_t bad_rkey = c.mr.rkey ^ 0x5a5a5a5au;
    if (bad_rkey == c.ro.rkey || bad_rkey == 0) bad_rkey ^= 0x01010101u;
    struct {
        const char *what;
        uint8_t op, flags;
        uint32_t len, rkey;
        uint64_t addr;
        size_t payload;
        uint16_t status;
    } cases[] = {
        {"write, unknown rkey", W_OP_WRITE, 0, 64, bad_rkey, c.mr.addr + HS_LEGIT, 64,
         W_NAK_ACCESS},
        {"write across the end", W_OP_WRITE, 0, 64, c.mr.rkey, c.mr.addr + HS_REGION - 32, 64,
         W_NAK_ACCESS},
        {"write past the end", W_OP_WRITE, 0, 64, c.mr.rkey, c.mr.addr + HS_REGION, 64,
         W_NAK_ACCESS},
        {"write before the start", W_OP_WRITE, 0, 64, c.mr.rkey, c.mr.addr - 8, 64, W_NAK_ACCESS},
        {"write, address wraps", W_OP_WRITE, 0, 64, c.mr.rkey, UINT64_MAX - 31, 64, W_NAK_ACCESS},
        {"write, 1 GiB", W_OP_WRITE, 0, W_MAX_LEN, c.mr.rkey, c.mr.addr, 0, W_NAK_ACCESS},
        {"write to a read-only region", W_OP_WRITE, 0, 64, c.ro.rkey, c.ro.addr, 64, W_NAK_ACCESS},
        {"write-imm past the end", W_OP_WRITE_IMM, 0, 64, c.mr.rkey, c.mr.addr + HS_REGION, 64,
         W_NAK_ACCESS},
        {"read, unknown rkey", W_OP_READ, 0, 64, bad_rkey, c.mr.addr, 0, W_NAK_ACCESS},
        {"read across the end", W_OP_READ, 0, 4096, c.mr.rkey, c.mr.addr + HS_REGION - 8, 0,
         W_NAK_ACCESS},
        {"read, 1 GiB", W_OP_READ, 0, W_MAX_LEN, c.mr.rkey, c.mr.addr, 0, W_NAK_ACCESS},
        {"read, address wraps", W_OP_READ, 0, 64, c.ro.rkey, UINT64_MAX - 7, 0, W_NAK_ACCESS},
        {"flush past the end", W_OP_FLUSH, W_FLAG_PERSISTENT, 64, c.mr.rkey, c.mr.addr + HS_REGION,
         0, W_NAK_ACCESS},
        {"flush, unknown rkey", W_OP_FLUSH, 0, 64, bad_rkey, c.mr.addr, 0, W_NAK_ACCESS},
        /* a flush is checked as the 8-byte read that carries it out on RDMA: READ_SRC allows it
         * (a persistent one too), but not 4 bytes before the end */
        {"flush of a read-only region's last 4 bytes", W_OP_FLUSH, W_FLAG_PERSISTENT, 4, c.ro.rkey,
         c.ro.addr + HS_RO - 4, 0, W_NAK_ACCESS},
        {"atomic, misaligned", W_OP_ATOMIC, 0, 8, c.mr.rkey, c.mr.addr + HS_LEGIT + 4, 0,
         W_NAK_INVALID},
        {"atomic, 16 bytes", W_OP_ATOMIC, 0, 16, c.mr.rkey, c.mr.addr + HS_LEGIT, 0, W_NAK_INVALID},
        {"atomic past the end", W_OP_ATOMIC, 0, 8, c.mr.rkey, c.mr.addr + HS_REGION, 0,
         W_NAK_ACCESS},
        {"atomic into the guard", W_OP_ATOMIC, 0, 8, c.mr.rkey, c.mr.addr - 8, 0, W_NAK_ACCESS},
        {"atomic to a read-only region", W_OP_ATOMIC, 0, 8, c.ro.rkey, c.ro.addr, 0, W_NAK_ACCESS},
        {"send larger than the posted receive", W_OP_SEND, 0, 1000, 0, 0, 1000, W_NAK_INVALID},
    };
    static uint8_t big[1000];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++, n++) {
        w_conn_open(&c, g_addr, g_port);
        CHECK(cases[i].payload <= sizeof(big));
        w_random(big, sizeof(big));
        CHECK(w_frame_send(c.main_fd, cases[i].op, cases[i].flags | W_FLAG_ACK_REQ, cases[i].len,
                           cases[i].rkey, cases[i].addr, 0, big, cases[i].payload));
        expect_nak(&c, 1, cases[i].status, cases[i].what);
        /* the queue pair is in error now: a later valid request is dropped, not executed */
        CHECK(w_frame_send(c.main_fd, W_OP_WRITE, W_FLAG_ACK_REQ, 64, c.mr.rkey,
                           c.mr.addr + HS_LEGIT, 0, payload, 64));
        int r = read_answer(&c, &f, 300);
        if (r == 1)
            IT_FAIL("%s: a request after the NAK was answered (op %u seq %llu)", cases[i].what,
                    f.op, (unsigned long long)f.aux);
        w_conn_close(&c);
    }
    printf("%d bad requests NAKed as documented\n", n - 1);
    return n;
}

/* hundreds of connections opened and closed as fast as possible, bounded in count and time */
static int case_rapid_cycles(void) {
    long long start = it_now_ms(), limit = start + 40000;
    int plain = 0, junk = 0, full = 0;
    for (int i = 0; i < 300 && it_now_ms() < limit; i++, plain++) {
        int fd = raw_connect();
        if (i % 2)
            w_close_rst(fd);
        else
            close(fd);
    }
    for (int i = 0; i < 100 && it_now_ms() < limit; i++, junk++) {
        int fd = raw_connect();
        uint8_t b[100];
        w_random(b, sizeof(b));
        CHECK(w_send_all(fd, b, 1 + (size_t)(b[0] % 100)));
        w_close_rst(fd);
    }
    for (int i = 0; i < 100 && it_now_ms() < limit; i++, full++) {
        struct w_conn c;
        w_conn_open(&c, g_addr, g_port);
        if (i % 2) {
            w_close_rst(c.main_fd);
            w_close_rst(c.join_fd);
            c.main_fd = c.join_fd = -1;
        }
        w_conn_close(&c);
    }
    printf("rapid cycles: %d bare, %d junk, %d full handshakes in %lld ms\n", plain, junk, full,
           it_now_ms() - start);
    CHECK_EQ(plain, 300);
    CHECK_EQ(junk, 100);
    CHECK_EQ(full, 100);
    return full;
}

struct hcase {
    const char *name;
    int (*fn)(void);
    /* how the server sees each hostile connection end: LOST for a protocol violation, CLOSED
     * where the client only closes or resets its sockets (as a process that exits or dies) */
    bool closes;
};

static const struct hcase CASES[] = {
    {"random_hello", case_random_hello, false},
    {"short_hello_stall", case_short_hello_stall, false},
    {"hello_then_garbage", case_hello_then_garbage, false},
    {"huge_lengths", case_huge_lengths, false},
    {"half_handshake", case_half_handshake, false},
    {"lone_half_stream", case_lone_half_stream, false},
    {"bad_opcodes", case_bad_opcodes, false},
    {"truncated_frames", case_truncated_frames, true},
    {"bad_requests", case_bad_requests, true},
    {"rapid_cycles", case_rapid_cycles, true},
};

int main(int argc, char *argv[]) {
    alarm(100); /* backstop: the ctest TIMEOUT is longer */
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_WARNING));
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "xfail_half_open") == 0)) {
        fprintf(stderr, "usage: %s ADDR PORT CASE|quit [xfail_half_open]\n", argv[0]);
        return 2;
    }
    g_xfail_half_open = argc == 5;
    g_addr = argv[1];
    g_port = argv[2];
    if (strcmp(argv[3], "quit") == 0) {
        struct legit l;
        struct hs_stats st;
        legit_open(&l);
        legit_io(&l);
        legit_cmd(&l, "QUIT", &st);
        legit_close(&l);
        return 0;
    }
    const struct hcase *hc = NULL;
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++)
        if (strcmp(CASES[i].name, argv[3]) == 0) hc = &CASES[i];
    if (!hc) IT_FAIL("unknown case %s", argv[3]);

    struct hs_stats pre = legit_session(-1, 15000);
    long long t0 = it_now_ms();
    int hostile = hc->fn();
    long long t1 = it_now_ms();
    /* half-open requests may wait for the listener's Hello timeout before they are dropped */
    struct hs_stats post = legit_session(pre.fds, 20000);
    printf(
        "%s: attack %lld ms; server requests %lu -> %lu, lost %lu -> %lu, descriptors %d -> "
        "%d\n",
        hc->name, t1 - t0, pre.reqs, post.reqs, pre.lost, post.lost, pre.fds, post.fds);
    /* the post session is the only legitimate request between the two snapshots */
    CHECK_EQ(post.reqs - pre.reqs, (unsigned long)hostile + 1);
    /* and the pre session's orderly disconnect */
    CHECK_EQ(post.lost - pre.lost, hc->closes ? 0 : (unsigned long)hostile);
    CHECK_EQ(post.closed - pre.closed, hc->closes ? (unsigned long)hostile + 1 : 1);
    if (g_xfail_half_open && !g_half_open_bug_seen)
        IT_FAIL(
            "XPASS: the half-open request bug is gone; drop xfail_half_open for %s in "
            "tests/hardening/CMakeLists.txt",
            hc->name);
    printf("%s: PASS%s\n", hc->name, g_half_open_bug_seen ? " (with the known bug)" : "");
    return 0;
}
