/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpspm_order.c -- causal completion order under a GPSPM-style load, as fio's librpma_gpspm
 * engine makes it.
 *
 * The client keeps QD requests in flight. A request is an rpma_write of 8 bytes into the server's
 * region followed by a send of a small "flush request" naming what was written; the client issues
 * a new request only after the RECV of the answer to an earlier one.
 *
 * The server is shaped like fio's librpma_gpspm_server: a fixed array of QD pending receive
 * completions, filled by rpma_cq_get_wc(cq, QD, ...) polling (MODE "wait": rpma_cq_wait when the
 * CQ is empty; MODE "poll": busy polling), each request answered with a signaled send while fewer
 * than QD answer sends are outstanding. rpma's own guarantee, beyond RDMA's (soft-RoCE breaks it:
 * the reference run exempts this test, docs/testing.md): the client's NIC acknowledges an answer on
 * arrival, before the client can react to it, so the server always gets the SEND completion of an
 * answer before the RECV of any request sent in reaction to it: requests received and not yet
 * answered plus answers sent and not yet completed never exceed QD. A RECV that would exceed it
 * would be written past the array in fio (memory corruption); here it is caught before the write
 * and fails the test with the numbers.
 *
 * The client checks the same order from its side: the IBV_WC_SEND of a request comes before the
 * IBV_WC_RECV of its answer, and it never gets more RECVs than it has requests outstanding. The
 * server checks that the written bytes are in place when the flush request arrives.
 *
 * Arguments (both roles): QD MODE SECONDS
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "common.h"

#define MSG 16
#define SLOT 64 /* bytes of the server's region per request slot */
#define WR_SEND 0x20000
#define WR_RECV 0x10000
#define FLAG_BYE 1u

struct request {
    uint64_t seq;
    uint32_t slot;
    uint32_t flags;
};

struct answer {
    uint64_t seq;
    uint64_t zero;
};

static int qd;
static bool busy_poll;
static int seconds;

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    size_t region_size = (size_t)qd * SLOT;
    char *region = it_alloc(region_size);
    char *rbuf = it_alloc((size_t)qd * MSG), *sbuf = it_alloc((size_t)qd * MSG);
    struct rpma_mr_local *mr = NULL, *rmr = NULL, *smr = NULL;
    CHECK_OK(rpma_mr_reg(peer, region, region_size, RPMA_MR_USAGE_WRITE_DST, &mr));
    CHECK_OK(rpma_mr_reg(peer, rbuf, (size_t)qd * MSG, RPMA_MR_USAGE_RECV, &rmr));
    CHECK_OK(rpma_mr_reg(peer, sbuf, (size_t)qd * MSG, RPMA_MR_USAGE_SEND, &smr));
    char desc[IT_MR_DESC_SIZE];
    CHECK_OK(rpma_mr_get_descriptor(mr, desc));

    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, (uint32_t)qd));
    CHECK_OK(rpma_conn_cfg_set_rq_size(cfg, (uint32_t)qd));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, (uint32_t)(2 * qd)));

    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn_req *req = it_next_req(ep, cfg);
    /* as fio's prepare_connection: every receive posted on the request */
    for (int i = 0; i < qd; i++)
        CHECK_OK(
            rpma_conn_req_recv(req, rmr, (size_t)i * MSG, MSG, (void *)(uintptr_t)(WR_RECV + i)));
    struct rpma_conn *conn = it_accept(&req, desc, sizeof(desc));
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    /* fio's in-memory queue: exactly QD entries */
    struct ibv_wc *pending = calloc((unsigned)qd, sizeof(*pending));
    struct ibv_wc *wc = calloc((unsigned)qd, sizeof(*wc));
    int *free_send = calloc((unsigned)qd, sizeof(*free_send)); /* a stack of free send buffers */
    CHECK(pending && wc && free_send);
    for (int i = 0; i < qd; i++) free_send[i] = qd - 1 - i;
    int free_n = qd;
    int queued = 0;    /* requests received and not yet answered */
    int sends_out = 0; /* answer sends posted and not yet completed */
    int max_in_use = 0;
    uint64_t next_seq = 0, waits = 0;
    bool bye = false;
    long long deadline = it_now_ms() + (long long)seconds * 1000 + 30000;

    while (!(bye && sends_out == 0)) {
        int n = 0;
        int ret = rpma_cq_get_wc(cq, qd, wc, &n);
        if (ret == RPMA_E_NO_COMPLETION) {
            if (busy_poll) {
                if ((++waits & 0x3ff) == 0 && it_now_ms() > deadline)
                    IT_FAIL("server: depth %d: no end after %d s", qd, seconds + 30);
                continue;
            }
            waits++;
            ret = rpma_cq_wait(cq); /* as fio does; the alarm bounds it */
            if (ret != 0 && ret != RPMA_E_NO_COMPLETION)
                IT_FAIL("server: rpma_cq_wait returned %d (%s)", ret, rpma_err_2str(ret));
            continue;
        }
        if (ret != 0) IT_FAIL("server: rpma_cq_get_wc returned %d (%s)", ret, rpma_err_2str(ret));
        CHECK(n >= 1 && n <= qd);
        for (int k = 0; k < n; k++) {
            if (wc[k].status == IBV_WC_WR_FLUSH_ERR && bye && wc[k].wr_id >= WR_RECV &&
                wc[k].wr_id < WR_RECV + (uint64_t)qd)
                continue; /* the client disconnects after the last answer: receives flushed */
            if (wc[k].status != IBV_WC_SUCCESS)
                IT_FAIL("server: depth %d: completion opcode %d wr_id %#llx failed: %s", qd,
                        (int)wc[k].opcode, (unsigned long long)wc[k].wr_id,
                        it_wc_status_str(wc[k].status));
            if (wc[k].opcode == IBV_WC_SEND) {
                CHECK(wc[k].wr_id >= WR_SEND && wc[k].wr_id < WR_SEND + (uint64_t)qd);
                CHECK(sends_out > 0 && free_n < qd);
                sends_out--;
                free_send[free_n++] = (int)(wc[k].wr_id - WR_SEND);
                continue;
            }
            CHECK_EQ(wc[k].opcode, IBV_WC_RECV);
            CHECK(wc[k].wr_id >= WR_RECV && wc[k].wr_id < WR_RECV + (uint64_t)qd);
            const struct request *rq = (const void *)(rbuf + (wc[k].wr_id - WR_RECV) * MSG);
            /*
             * fio would store this completion at pending[queued]. Once the client's reaction to
             * an answer can arrive before that answer's send completion, received-unanswered
             * plus sent-uncompleted exceeds QD and the store lands past the array.
             */
            if (queued + sends_out + 1 > qd || queued >= qd)
                IT_FAIL(
                    "server: depth %d (%s): the RECV of request %llu arrived while %d "
                    "requests were unanswered and %d answer sends were not completed: %d "
                    "entries for a pending array of %d (fio's gpspm server would write past "
                    "it). The client issued this request in reaction to an answer whose "
                    "IBV_WC_SEND had not been delivered yet: causal completion order violated",
                    qd, busy_poll ? "poll" : "wait", (unsigned long long)rq->seq, queued, sends_out,
                    queued + sends_out + 1, qd);
            pending[queued++] = wc[k];
            if (queued + sends_out > max_in_use) max_in_use = queued + sends_out;
        }
        /* answer what is queued while send-queue slots are free (fio's msg_sqe_available) */
        int done = 0;
        while (done < queued && sends_out < qd) {
            const struct ibv_wc *w = &pending[done++];
            int rslot = (int)(w->wr_id - WR_RECV);
            struct request rq;
            memcpy(&rq, rbuf + (size_t)rslot * MSG, sizeof(rq));
            CHECK_EQ(w->byte_len, MSG);
            if (rq.seq != next_seq)
                IT_FAIL("server: request %llu arrived where %llu was expected",
                        (unsigned long long)rq.seq, (unsigned long long)next_seq);
            CHECK((int)rq.slot < qd);
            uint64_t placed;
            memcpy(&placed, region + (size_t)rq.slot * SLOT, sizeof(placed));
            if (!(rq.flags & FLAG_BYE) && placed != rq.seq)
                IT_FAIL("server: request %llu: its write is not in place (slot %u holds %llu)",
                        (unsigned long long)rq.seq, rq.slot, (unsigned long long)placed);
            next_seq++;
            if (rq.flags & FLAG_BYE) bye = true;
            CHECK_OK(rpma_recv(conn, rmr, (size_t)rslot * MSG, MSG, (void *)w->wr_id));
            CHECK(free_n > 0);
            int s = free_send[--free_n];
            struct answer ans = {.seq = rq.seq, .zero = 0};
            memcpy(sbuf + (size_t)s * MSG, &ans, sizeof(ans));
            CHECK_OK(rpma_send(conn, smr, (size_t)s * MSG, MSG, RPMA_F_COMPLETION_ALWAYS,
                               (void *)(uintptr_t)(WR_SEND + s)));
            sends_out++;
        }
        if (done > 0) {
            memmove(pending, pending + done, (size_t)(queued - done) * sizeof(*pending));
            queued -= done;
        }
    }
    printf(
        "server: depth %d (%s): %llu requests answered, at most %d of %d entries in use, "
        "%llu empty polls\n",
        qd, busy_poll ? "poll" : "wait", (unsigned long long)next_seq, max_in_use, qd,
        (unsigned long long)waits);

    it_disconnect_passive(&conn, false);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_mr_dereg(&rmr));
    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(pending);
    free(wc);
    free(free_send);
    free(region);
    free(rbuf);
    free(sbuf);
}

struct client {
    struct rpma_conn *conn;
    struct rpma_mr_remote *dst;
    struct rpma_mr_local *wmr, *smr, *rmr;
    char *wsrc, *sbuf, *rbuf;
    uint64_t next_seq;   /* of the next request */
    uint64_t next_reply; /* seq of the next answer expected */
    int outstanding;     /* requests whose answer has not come */
    int *fifo;           /* slots in issue order */
    int fifo_head;
    bool *send_done;
};

static void issue(struct client *c, int slot, uint32_t flags) {
    uint64_t seq = c->next_seq++;
    memcpy(c->wsrc + (size_t)slot * 8, &seq, 8);
    if (!(flags & FLAG_BYE))
        CHECK_OK(rpma_write(c->conn, c->dst, (size_t)slot * SLOT, c->wmr, (size_t)slot * 8, 8,
                            RPMA_F_COMPLETION_ON_ERROR, NULL));
    struct request rq = {.seq = seq, .slot = (uint32_t)slot, .flags = flags};
    memcpy(c->sbuf + (size_t)slot * MSG, &rq, sizeof(rq));
    c->send_done[slot] = false;
    CHECK_OK(rpma_send(c->conn, c->smr, (size_t)slot * MSG, MSG, RPMA_F_COMPLETION_ALWAYS,
                       (void *)(uintptr_t)(WR_SEND + slot)));
    c->fifo[(c->fifo_head + c->outstanding) % qd] = slot;
    c->outstanding++;
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    struct client c = {0};
    c.wsrc = it_alloc((size_t)qd * 8);
    c.sbuf = it_alloc((size_t)qd * MSG);
    c.rbuf = it_alloc((size_t)qd * MSG);
    c.fifo = calloc((unsigned)qd, sizeof(int));
    c.send_done = calloc((unsigned)qd, sizeof(bool));
    CHECK(c.fifo && c.send_done);
    CHECK_OK(rpma_mr_reg(peer, c.wsrc, (size_t)qd * 8, RPMA_MR_USAGE_WRITE_SRC, &c.wmr));
    CHECK_OK(rpma_mr_reg(peer, c.sbuf, (size_t)qd * MSG, RPMA_MR_USAGE_SEND, &c.smr));
    CHECK_OK(rpma_mr_reg(peer, c.rbuf, (size_t)qd * MSG, RPMA_MR_USAGE_RECV, &c.rmr));
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, (uint32_t)(2 * qd)));
    CHECK_OK(rpma_conn_cfg_set_rq_size(cfg, (uint32_t)qd));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, (uint32_t)(2 * qd)));
    c.conn = it_connect(peer, a->addr, a->port, cfg, NULL, 0);
    c.dst = it_remote_mr(c.conn, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(c.conn, &cq));
    for (int i = 0; i < qd; i++)
        CHECK_OK(rpma_recv(c.conn, c.rmr, (size_t)i * MSG, MSG, (void *)(uintptr_t)(WR_RECV + i)));

    long long t0 = it_now_ms(), end = t0 + (long long)seconds * 1000;
    for (int i = 0; i < qd; i++) issue(&c, i, 0);
    bool bye_sent = false;
    while (c.outstanding > 0) {
        struct ibv_wc wc;
        if (!it_cq_next(cq, &wc, IT_WAIT_MS))
            IT_FAIL("client: depth %d: no completion within %d ms (%d requests outstanding)", qd,
                    IT_WAIT_MS, c.outstanding);
        if (wc.status != IBV_WC_SUCCESS)
            IT_FAIL("client: depth %d: completion opcode %d wr_id %#llx failed: %s", qd,
                    (int)wc.opcode, (unsigned long long)wc.wr_id, it_wc_status_str(wc.status));
        if (wc.opcode == IBV_WC_SEND) {
            CHECK(wc.wr_id >= WR_SEND && wc.wr_id < WR_SEND + (uint64_t)qd);
            int slot = (int)(wc.wr_id - WR_SEND);
            CHECK(!c.send_done[slot]);
            c.send_done[slot] = true;
            continue;
        }
        CHECK_EQ(wc.opcode, IBV_WC_RECV);
        CHECK(wc.wr_id >= WR_RECV && wc.wr_id < WR_RECV + (uint64_t)qd);
        CHECK_EQ(wc.byte_len, MSG);
        if (c.outstanding <= 0) IT_FAIL("client: depth %d: a RECV with no request outstanding", qd);
        struct answer ans;
        memcpy(&ans, c.rbuf + (wc.wr_id - WR_RECV) * MSG, sizeof(ans));
        if (ans.seq != c.next_reply)
            IT_FAIL("client: depth %d: the answer to request %llu came where %llu was expected", qd,
                    (unsigned long long)ans.seq, (unsigned long long)c.next_reply);
        int slot = c.fifo[c.fifo_head];
        if (!c.send_done[slot])
            IT_FAIL(
                "client: depth %d: request %llu: the IBV_WC_RECV of its answer came before "
                "the IBV_WC_SEND of the request itself (causal completion order violated)",
                qd, (unsigned long long)ans.seq);
        c.fifo_head = (c.fifo_head + 1) % qd;
        c.outstanding--;
        c.next_reply++;
        CHECK_OK(
            rpma_recv(c.conn, c.rmr, (size_t)(wc.wr_id - WR_RECV) * MSG, MSG, (void *)wc.wr_id));
        if (it_now_ms() < end) {
            issue(&c, slot, 0);
        } else if (c.outstanding == 0 && !bye_sent) {
            issue(&c, slot, FLAG_BYE); /* the server stops after answering this one */
            bye_sent = true;
        }
    }
    long long ms = it_now_ms() - t0;
    printf("client: depth %d (%s): %llu requests in %lld ms (%.0f/s), causal order kept\n", qd,
           busy_poll ? "poll" : "wait", (unsigned long long)c.next_seq, ms,
           ms > 0 ? (double)c.next_seq * 1000.0 / (double)ms : 0.0);
    it_cq_expect_empty(cq);

    it_disconnect_active(&c.conn);
    CHECK_OK(rpma_mr_remote_delete(&c.dst));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&c.wmr));
    CHECK_OK(rpma_mr_dereg(&c.smr));
    CHECK_OK(rpma_mr_dereg(&c.rmr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(c.fifo);
    free(c.send_done);
    free(c.wsrc);
    free(c.sbuf);
    free(c.rbuf);
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    if (a.argc != 3) IT_FAIL("arguments: QD wait|poll SECONDS");
    qd = atoi(a.argv[0]);
    if (strcmp(a.argv[1], "poll") == 0)
        busy_poll = true;
    else if (strcmp(a.argv[1], "wait") != 0)
        IT_FAIL("MODE must be wait or poll, not %s", a.argv[1]);
    seconds = atoi(a.argv[2]);
    CHECK(qd >= 1 && qd <= 1024);
    CHECK(seconds >= 1 && seconds <= 30);
    alarm((unsigned)seconds + 30);
    if (a.server)
        server(&a);
    else
        client(&a);
    return 0;
}
