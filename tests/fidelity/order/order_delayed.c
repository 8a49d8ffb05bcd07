/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * order_delayed.c -- causal completion order when the responder's answers are slow to arrive.
 *
 * On RDMA the responder's NIC acknowledges a message (and returns read data) before the
 * responder's application can react to it, so the requester always gets the completion of its
 * own message before any completion caused by the peer's reaction: the IBV_WC_SEND of a message
 * comes before the IBV_WC_RECV of the reply to it. The tcp provider sends a side's answers (ACK,
 * read response) on one TCP stream and its requests on the other; on a real network the reply
 * can overtake the answer. This test makes it do so on loopback: the server runs with the
 * delay_answers shim (LD_PRELOAD), which holds every answer frame back DELAY_US microseconds while
 * the server's reply goes out at once.
 *
 * Scenarios (the client posts, the server replies with a send on each receive; one CQ on the
 * client, so the CQ order is the completion order):
 *   send        send (signaled)                  -> IBV_WC_SEND, IBV_WC_RECV
 *   read_send   read (signaled) of the server's region, send (signaled)
 *                                                -> IBV_WC_RDMA_READ (data checked), IBV_WC_SEND,
 *                                                   IBV_WC_RECV
 *   write_send  write (unsignaled) into the server's region, send (signaled); the server checks
 *               the write is in place when the message arrives
 *                                                -> IBV_WC_SEND, IBV_WC_RECV
 * The client fails at the first completion out of order. The server checks the same order from
 * its side: the IBV_WC_SEND of its reply comes before the IBV_WC_RECV of the next message.
 *
 * Arguments (both roles): SCENARIO ROUNDS DELAY_US SHIM. The server role re-executes itself with
 * SHIM in LD_PRELOAD and RPMA_TEST_DELAY_ANSWERS_US=DELAY_US (DELAY_US 0: no shim, a control
 * run); the client runs without it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define MSG 64
#define READ_LEN 8192 /* the part of the server's region the client reads */
#define WRITE_LEN 256 /* the part it writes, behind the read part */
#define REGION (READ_LEN + WRITE_LEN)
#define SEED_REGION 0x7e000000ULL
#define SEED_PING 0x7a000000ULL
#define SEED_PONG 0x7b000000ULL
#define SEED_WRITE 0x7c000000ULL
#define WR_RECV 0x11
#define WR_SEND 0x22
#define WR_READ 0x33
#define ALARM_S 45
#define ENV_DELAY "RPMA_TEST_DELAY_ANSWERS_US"
#define ENV_REEXEC "RPMA_TEST_ORDER_DELAYED_REEXEC"

enum scenario { SC_SEND, SC_READ_SEND, SC_WRITE_SEND };

static enum scenario scenario;
static const char *scenario_str;
static int rounds_n;
static long delay_us;

static const char *op_name(enum ibv_wc_opcode op) {
    switch (op) {
        case IBV_WC_SEND:
            return "IBV_WC_SEND";
        case IBV_WC_RECV:
            return "IBV_WC_RECV";
        case IBV_WC_RDMA_READ:
            return "IBV_WC_RDMA_READ";
        case IBV_WC_RDMA_WRITE:
            return "IBV_WC_RDMA_WRITE";
        default:
            return "another opcode";
    }
}

/* the server role: run again with the shim preloaded, the delay set and ASan told to allow it */
static void reexec_with_shim(char *argv[], const char *shim) {
    if (access(shim, R_OK) != 0) IT_FAIL("the shim %s: %s", shim, strerror(errno));
    const char *old = getenv("LD_PRELOAD");
    char *preload = NULL;
    if (asprintf(&preload, "%s%s%s", shim, old && *old ? ":" : "", old && *old ? old : "") < 0)
        IT_FAIL("asprintf failed");
    /* an ASan runtime must come first in the library list unless this check is off */
    const char *asan = getenv("ASAN_OPTIONS");
    char *asan_opts = NULL;
    if (asprintf(&asan_opts, "%s%sverify_asan_link_order=0", asan && *asan ? asan : "",
                 asan && *asan ? ":" : "") < 0)
        IT_FAIL("asprintf failed");
    char delay[32];
    snprintf(delay, sizeof(delay), "%ld", delay_us);
    CHECK_EQ(setenv("LD_PRELOAD", preload, 1), 0);
    CHECK_EQ(setenv("ASAN_OPTIONS", asan_opts, 1), 0);
    CHECK_EQ(setenv(ENV_DELAY, delay, 1), 0);
    CHECK_EQ(setenv(ENV_REEXEC, "1", 1), 0);
    fflush(stdout);
    execv("/proc/self/exe", argv);
    IT_FAIL("execv(/proc/self/exe) failed: %s", strerror(errno));
}

/* the shim's count of delayed answer frames; fails when the shim is not loaded */
static unsigned long shim_delayed(void) {
    unsigned long (*count)(void) =
        (unsigned long (*)(void))dlsym(RTLD_DEFAULT, "rpma_test_delayed_answers");
    if (!count) IT_FAIL("server: the delay_answers shim is not loaded (LD_PRELOAD)");
    return count();
}

static void server(const struct it_args *a) {
    if (delay_us > 0) (void)shim_delayed();
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *region = it_alloc(REGION);
    it_fill(region, READ_LEN, SEED_REGION);
    char *rbuf = it_alloc(MSG), *sbuf = it_alloc(MSG);
    struct rpma_mr_local *mr = NULL, *rmr = NULL, *smr = NULL;
    CHECK_OK(
        rpma_mr_reg(peer, region, REGION, RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST, &mr));
    CHECK_OK(rpma_mr_reg(peer, rbuf, MSG, RPMA_MR_USAGE_RECV, &rmr));
    CHECK_OK(rpma_mr_reg(peer, sbuf, MSG, RPMA_MR_USAGE_SEND, &smr));
    char desc[IT_MR_DESC_SIZE];
    CHECK_OK(rpma_mr_get_descriptor(mr, desc));

    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, 4));
    CHECK_OK(rpma_conn_cfg_set_rq_size(cfg, 4));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, 8));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn_req *req = it_next_req(ep, cfg);
    CHECK_OK(rpma_conn_req_recv(req, rmr, 0, MSG, (void *)WR_RECV));
    struct rpma_conn *conn = it_accept(&req, desc, sizeof(desc));
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    int recv_done = 0, send_done = 0;
    while (recv_done < rounds_n || send_done < rounds_n) {
        struct ibv_wc wc;
        it_cq_get(cq, &wc);
        if (wc.status != IBV_WC_SUCCESS)
            IT_FAIL("server: %s round %d: completion %s failed: %s", scenario_str, recv_done,
                    op_name(wc.opcode), it_wc_status_str(wc.status));
        if (wc.opcode == IBV_WC_SEND) {
            CHECK_EQ(wc.wr_id, WR_SEND);
            CHECK(send_done < recv_done);
            send_done++;
            continue;
        }
        CHECK_EQ(wc.opcode, IBV_WC_RECV);
        CHECK_EQ(wc.wr_id, WR_RECV);
        CHECK_EQ(wc.byte_len, MSG);
        int r = recv_done;
        if (r >= rounds_n) IT_FAIL("server: %s: a receive after the last round", scenario_str);
        if (send_done != r)
            IT_FAIL(
                "server: %s round %d: the IBV_WC_RECV of message %d came before the IBV_WC_SEND "
                "of the reply to message %d (causal completion order violated)",
                scenario_str, r, r, r - 1);
        long bad = it_verify(rbuf, MSG, SEED_PING + (uint64_t)r);
        if (bad >= 0)
            IT_FAIL("server: %s round %d: message differs at byte %ld", scenario_str, r, bad);
        if (scenario == SC_WRITE_SEND) {
            /* the write was posted before the message: it is in place when the message is */
            bad = it_verify(region + READ_LEN, WRITE_LEN, SEED_WRITE + (uint64_t)r);
            if (bad >= 0)
                IT_FAIL("server: write_send round %d: the write is not in place (byte %ld)", r,
                        bad);
        }
        recv_done++;
        if (recv_done < rounds_n) CHECK_OK(rpma_recv(conn, rmr, 0, MSG, (void *)WR_RECV));
        it_fill(sbuf, MSG, SEED_PONG + (uint64_t)r);
        CHECK_OK(rpma_send(conn, smr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_SEND));
    }
    it_cq_expect_empty(cq);
    /* the read part is never modified: an answer in flight may still be sent from it */
    CHECK(it_verify(region, READ_LEN, SEED_REGION) < 0);
    if (delay_us > 0) {
        unsigned long delayed = shim_delayed();
        printf("server: %s: %d messages answered, %lu answer frames delayed %ld us each\n",
               scenario_str, recv_done, delayed, delay_us);
        if (delayed == 0) IT_FAIL("server: the shim delayed no answer frame: nothing was tested");
    } else {
        printf("server: %s: %d messages answered, no delay (control run)\n", scenario_str,
               recv_done);
    }

    it_disconnect_passive(&conn, false);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_mr_dereg(&rmr));
    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(region);
    free(rbuf);
    free(sbuf);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *sbuf = it_alloc(MSG), *rbuf = it_alloc(MSG);
    char *rdst = it_alloc(READ_LEN), *wsrc = it_alloc(WRITE_LEN);
    struct rpma_mr_local *smr = NULL, *rmr = NULL, *rdmr = NULL, *wmr = NULL;
    CHECK_OK(rpma_mr_reg(peer, sbuf, MSG, RPMA_MR_USAGE_SEND, &smr));
    CHECK_OK(rpma_mr_reg(peer, rbuf, MSG, RPMA_MR_USAGE_RECV, &rmr));
    CHECK_OK(rpma_mr_reg(peer, rdst, READ_LEN, RPMA_MR_USAGE_READ_DST, &rdmr));
    CHECK_OK(rpma_mr_reg(peer, wsrc, WRITE_LEN, RPMA_MR_USAGE_WRITE_SRC, &wmr));

    /* no RCQ: sends, reads and receives complete into one CQ, in one order */
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, 4));
    CHECK_OK(rpma_conn_cfg_set_rq_size(cfg, 4));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, 8));
    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, cfg, NULL, 0);
    struct rpma_mr_remote *dst = it_remote_mr(conn, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    long long t0 = it_now_ms();
    long completions = 0;
    for (int r = 0; r < rounds_n; r++) {
        CHECK_OK(rpma_recv(conn, rmr, 0, MSG, (void *)WR_RECV));
        enum ibv_wc_opcode expect[3];
        int n = 0;
        if (scenario == SC_READ_SEND) {
            memset(rdst, 0, READ_LEN);
            CHECK_OK(rpma_read(conn, rdmr, 0, dst, 0, READ_LEN, RPMA_F_COMPLETION_ALWAYS,
                               (void *)WR_READ));
            expect[n++] = IBV_WC_RDMA_READ;
        } else if (scenario == SC_WRITE_SEND) {
            it_fill(wsrc, WRITE_LEN, SEED_WRITE + (uint64_t)r);
            CHECK_OK(rpma_write(conn, dst, READ_LEN, wmr, 0, WRITE_LEN, RPMA_F_COMPLETION_ON_ERROR,
                                NULL));
        }
        it_fill(sbuf, MSG, SEED_PING + (uint64_t)r);
        CHECK_OK(rpma_send(conn, smr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_SEND));
        expect[n++] = IBV_WC_SEND;
        expect[n++] = IBV_WC_RECV;

        for (int k = 0; k < n; k++) {
            struct ibv_wc wc;
            if (!it_cq_next(cq, &wc, IT_WAIT_MS))
                IT_FAIL("client: %s round %d: no completion within %d ms (waiting for %s)",
                        scenario_str, r, IT_WAIT_MS, op_name(expect[k]));
            if (wc.status != IBV_WC_SUCCESS)
                IT_FAIL("client: %s round %d: completion %s failed: %s", scenario_str, r,
                        op_name(wc.opcode), it_wc_status_str(wc.status));
            if (wc.opcode != expect[k])
                IT_FAIL(
                    "client: %s round %d (after %ld completions in order): completion %d is %s, "
                    "expected %s: the reply's IBV_WC_RECV may come only after the completions of "
                    "what it replies to (causal completion order violated)",
                    scenario_str, r, completions, k + 1, op_name(wc.opcode), op_name(expect[k]));
            completions++;
            if (wc.opcode == IBV_WC_RDMA_READ) {
                CHECK_EQ(wc.wr_id, WR_READ);
                long bad = it_verify(rdst, READ_LEN, SEED_REGION);
                if (bad >= 0)
                    IT_FAIL("client: read_send round %d: the read data differs at byte %ld", r,
                            bad);
            } else if (wc.opcode == IBV_WC_SEND) {
                CHECK_EQ(wc.wr_id, WR_SEND);
            } else {
                CHECK_EQ(wc.wr_id, WR_RECV);
                CHECK_EQ(wc.byte_len, MSG);
                long bad = it_verify(rbuf, MSG, SEED_PONG + (uint64_t)r);
                if (bad >= 0)
                    IT_FAIL("client: %s round %d: the reply differs at byte %ld", scenario_str, r,
                            bad);
            }
        }
    }
    long long ms = it_now_ms() - t0;
    it_cq_expect_empty(cq);
    printf("client: %s: %d rounds, %ld completions in causal order, %lld ms (delay %ld us)\n",
           scenario_str, rounds_n, completions, ms, delay_us);

    it_disconnect_active(&conn);
    CHECK_OK(rpma_mr_remote_delete(&dst));
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_mr_dereg(&rmr));
    CHECK_OK(rpma_mr_dereg(&rdmr));
    CHECK_OK(rpma_mr_dereg(&wmr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(sbuf);
    free(rbuf);
    free(rdst);
    free(wsrc);
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    if (a.argc != 4) IT_FAIL("arguments: send|read_send|write_send ROUNDS DELAY_US SHIM");
    scenario_str = a.argv[0];
    if (strcmp(scenario_str, "send") == 0)
        scenario = SC_SEND;
    else if (strcmp(scenario_str, "read_send") == 0)
        scenario = SC_READ_SEND;
    else if (strcmp(scenario_str, "write_send") == 0)
        scenario = SC_WRITE_SEND;
    else
        IT_FAIL("SCENARIO must be send, read_send or write_send, not %s", scenario_str);
    rounds_n = atoi(a.argv[1]);
    delay_us = atol(a.argv[2]);
    CHECK(rounds_n >= 1 && rounds_n <= 100000);
    CHECK(delay_us >= 0 && delay_us <= 1000000);
    alarm(ALARM_S);
    if (a.server && delay_us > 0 && !getenv(ENV_REEXEC)) reexec_with_shim(argv, a.argv[3]);
    if (a.server)
        server(&a);
    else
        client(&a);
    return 0;
}
