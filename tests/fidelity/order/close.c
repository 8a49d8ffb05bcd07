/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * close.c -- graceful close: a live peer that ends a connection gives the other side
 * RPMA_CONN_CLOSED, never RPMA_CONN_LOST, however abruptly it does so. LOST means a dead process
 * or a broken network.
 *
 * Scenarios (the first argument; the second, optional, is the number of rounds):
 *   disc_delete_server  the server accepts, then at once rpma_conn_disconnect and rpma_conn_delete
 *                       (no wait for CLOSED); the client must get CLOSED
 *   disc_delete_client  the mirror: the client disconnects and deletes at once once ESTABLISHED;
 *                       the server must get CLOSED
 *   delete_server       the server accepts and calls rpma_conn_delete only (no disconnect)
 *   delete_client       the client calls rpma_conn_delete only, once ESTABLISHED
 *   simultaneous        both sides call rpma_conn_disconnect at the same moment, then both must
 *                       get CLOSED before they delete. Even rounds: the server sends "disconnect
 *                       now" and disconnects when the send completes, the client when the receive
 *                       does. Odd rounds: the message names a CLOCK_REALTIME instant 5 ms ahead
 *                       and both spin until it.
 *   rnr_disc_server     the client sends with no receive posted (the server's responder waits
 *                       for one), and the server disconnects without posting one: both sides
 *                       must get CLOSED (the client disconnects but deletes only at the end),
 *                       and the client's send must end in an error completion
 *   rnr_disc_client     the mirror: the client sends with no receive posted and then
 *                       disconnects (deleting only at the end); the server must get CLOSED
 *                       while its responder waits, and the send must end in an error completion
 *
 * The side that ends connections abruptly stays alive until the other side has judged the last
 * round: one more connection, closed the ordinary way, follows the rounds.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define ALARM_S 45
#define MSG 16
#define WR_SEND 0x5e
#define WR_RECV 0x7e

/* RNR_DELETE: the client sends with no receive posted (the server's responder waits for one),
 * then disconnects and deletes */
/* RNR_DISC: the client sends with no receive posted, and one side disconnects (no delete) */
enum scenario { DISC_DELETE, DELETE_ONLY, SIMULTANEOUS, RNR_DELETE, RNR_DISC };

struct plan {
    enum scenario what;
    bool server_ends; /* for DISC_DELETE and DELETE_ONLY: which side ends the connection */
    int rounds;
    const char *name;
};

struct sync_msg {
    uint32_t round;
    uint32_t at_instant; /* 0: disconnect on completion, 1: at at_ns */
    int64_t at_ns;       /* CLOCK_REALTIME */
};

static int64_t realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void spin_until(int64_t at_ns) {
    while (realtime_ns() < at_ns) {
    }
}

/* the abrupt end: disconnect (unless delete only) and delete at once */
static void end_abruptly(struct rpma_conn **conn, const struct plan *p, int round) {
    if (p->what == DISC_DELETE || p->what == RNR_DELETE) {
        int ret = rpma_conn_disconnect(*conn);
        if (ret != 0)
            IT_FAIL("%s round %d: rpma_conn_disconnect returned %d (%s)", p->name, round, ret,
                    rpma_err_2str(ret));
    }
    int ret = rpma_conn_delete(conn);
    if (ret != 0)
        IT_FAIL("%s round %d: rpma_conn_delete returned %d (%s)", p->name, round, ret,
                rpma_err_2str(ret));
    CHECK(*conn == NULL);
}

/* the next connection event, within IT_WAIT_MS; a failure names the round */
static enum rpma_conn_event next_event(struct rpma_conn *conn, const struct plan *p, int round,
                                       const char *who) {
    int fd = -1;
    CHECK_OK(rpma_conn_get_event_fd(conn, &fd));
    if (!it_poll_fd(fd, IT_WAIT_MS)) {
        /* tell a lost wake-up (an event queued, the fd not readable) from no event at all */
        int fl = fcntl(fd, F_GETFL);
        enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
        int ret = fl < 0 ? RPMA_E_UNKNOWN
                         : (fcntl(fd, F_SETFL, fl | O_NONBLOCK), rpma_conn_next_event(conn, &ev));
        if (ret == 0)
            IT_FAIL(
                "%s round %d: the %s's event fd stayed unreadable for %d ms while an event was "
                "queued: %s (a lost wake-up)",
                p->name, round, who, IT_WAIT_MS, rpma_utils_conn_event_2str(ev));
        IT_FAIL(
            "%s round %d: the %s got no connection event within %d ms (expected "
            "RPMA_CONN_CLOSED; a non-blocking rpma_conn_next_event then returned %d, %s)",
            p->name, round, who, IT_WAIT_MS, ret, rpma_err_2str(ret));
    }
    enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    CHECK_OK(rpma_conn_next_event(conn, &ev));
    return ev;
}

/*
 * The server's wait before it disconnects: the send's completion, or else the client's disconnect.
 * On RDMA the client may see its receive before its responder has acknowledged the send (rxe
 * completes, then acknowledges), and its disconnect can stop that acknowledgement: the send then
 * ends only when this side disconnects too, and waiting for it first would leave the client's DREQ
 * to time out (once in about five runs against the reference). Returns true if the event came (it
 * must be CLOSED), false if the send completed.
 */
static bool send_done_or_closed(struct rpma_conn *conn, struct rpma_cq *cq, const struct plan *p,
                                int round) {
    int efd = -1;
    CHECK_OK(rpma_conn_get_event_fd(conn, &efd));
    long long deadline = it_now_ms() + IT_WAIT_MS;
    while (it_now_ms() < deadline) {
        struct ibv_wc wc;
        int got = 0;
        int ret = rpma_cq_get_wc(cq, 1, &wc, &got);
        if (ret == 0) {
            if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND)
                IT_FAIL("%s round %d: the server's send completed with status %d, opcode %d",
                        p->name, round, (int)wc.status, (int)wc.opcode);
            return false;
        }
        if (ret != RPMA_E_NO_COMPLETION) IT_FAIL("rpma_cq_get_wc returned %d", ret);
        if (it_poll_fd(efd, 1)) {
            enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
            CHECK_OK(rpma_conn_next_event(conn, &ev));
            if (ev != RPMA_CONN_CLOSED)
                IT_FAIL("%s round %d: the server got %s (%d) before its send completed", p->name,
                        round, rpma_utils_conn_event_2str(ev), (int)ev);
            return true;
        }
    }
    IT_FAIL("%s round %d: neither the send's completion nor an event within %d ms", p->name, round,
            IT_WAIT_MS);
}

/* the next event must be CLOSED; why: what happened, for the failure's message */
static void await_closed(struct rpma_conn *conn, const struct plan *p, int round, const char *who,
                         const char *why) {
    enum rpma_conn_event ev = next_event(conn, p, round, who);
    if (ev != RPMA_CONN_CLOSED)
        IT_FAIL("%s round %d: the %s got %s (%d), expected RPMA_CONN_CLOSED: %s", p->name, round,
                who, rpma_utils_conn_event_2str(ev), (int)ev, why);
}

/* the live peer's view: the next event must be CLOSED; then it disconnects and deletes */
static void expect_closed(struct rpma_conn **conn, const struct plan *p, int round,
                          const char *who) {
    await_closed(*conn, p, round, who,
                 p->what == SIMULTANEOUS
                     ? "both sides disconnected at the same moment"
                     : (p->what == DISC_DELETE
                            ? "the peer called rpma_conn_disconnect and rpma_conn_delete and lives"
                            : (p->what == RNR_DELETE
                                   ? "the peer disconnected and deleted while its send waited "
                                     "for a receive"
                                   : (p->what == RNR_DISC
                                          ? "the peer disconnected while its send waited for a "
                                            "receive, and lives"
                                          : "the peer called rpma_conn_delete and lives"))));
    CHECK_OK(rpma_conn_disconnect(*conn));
    CHECK_OK(rpma_conn_delete(conn));
    CHECK(*conn == NULL);
}

static void server(const struct it_args *a, const struct plan *p) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *sbuf = it_alloc(MSG);
    struct rpma_mr_local *smr = NULL;
    CHECK_OK(rpma_mr_reg(peer, sbuf, MSG, RPMA_MR_USAGE_SEND, &smr));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();

    for (int r = 0; r < p->rounds; r++) {
        struct rpma_conn_req *req = it_next_req(ep, NULL);
        struct rpma_conn *conn = it_accept(&req, NULL, 0);
        if (p->what == SIMULTANEOUS) {
            struct rpma_cq *cq = NULL;
            CHECK_OK(rpma_conn_get_cq(conn, &cq));
            struct sync_msg m = {.round = (uint32_t)r, .at_instant = (uint32_t)(r & 1)};
            m.at_ns = realtime_ns() + 5000000;
            memcpy(sbuf, &m, sizeof(m));
            CHECK_OK(rpma_send(conn, smr, 0, sizeof(m), RPMA_F_COMPLETION_ALWAYS, (void *)WR_SEND));
            /* a slow client reacts after the instant, as in an even round */
            bool closed = send_done_or_closed(conn, cq, p, r);
            if (m.at_instant && !closed) spin_until(m.at_ns);
            CHECK_OK(rpma_conn_disconnect(conn));
            enum rpma_conn_event ev =
                closed ? RPMA_CONN_CLOSED : next_event(conn, p, r, a->server ? "server" : "client");
            if (ev != RPMA_CONN_CLOSED)
                IT_FAIL(
                    "%s round %d (%s): the server got %s (%d), expected RPMA_CONN_CLOSED "
                    "after both sides disconnected at the same moment",
                    p->name, r, m.at_instant ? "at an instant" : "on completion",
                    rpma_utils_conn_event_2str(ev), (int)ev);
            CHECK_OK(rpma_conn_delete(&conn));
        } else if (p->what == RNR_DISC && p->server_ends) {
            /* the client's send waits here for a receive that never comes (or comes after the
             * disconnect: dropped either way) */
            usleep(10000);
            CHECK_OK(rpma_conn_disconnect(conn));
            await_closed(conn, p, r, "server",
                         "it disconnected while the client's send waited for a receive");
            CHECK_OK(rpma_conn_delete(&conn));
        } else if (p->server_ends) {
            end_abruptly(&conn, p, r);
        } else {
            expect_closed(&conn, p, r, "server");
        }
    }
    if (p->what != SIMULTANEOUS) {
        /* the closing connection: the side that ended the rounds lived through all of them */
        struct rpma_conn_req *req = it_next_req(ep, NULL);
        struct rpma_conn *conn = it_accept(&req, NULL, 0);
        if (p->server_ends)
            it_disconnect_passive(&conn, false);
        else
            it_disconnect_active(&conn);
    }
    printf("server: %s: %d rounds, every live close seen as CLOSED\n", p->name, p->rounds);

    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(sbuf);
}

static void client(const struct it_args *a, const struct plan *p) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *rbuf = it_alloc(MSG);
    struct rpma_mr_local *rmr = NULL;
    CHECK_OK(rpma_mr_reg(peer, rbuf, MSG, RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_SEND, &rmr));
    long long t0 = it_now_ms();
    struct rpma_conn **kept = calloc((size_t)p->rounds, sizeof(*kept));
    CHECK(kept != NULL);

    for (int r = 0; r < p->rounds; r++) {
        struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
        if (p->what == SIMULTANEOUS) {
            struct rpma_cq *cq = NULL;
            CHECK_OK(rpma_conn_get_cq(conn, &cq));
            CHECK_OK(rpma_recv(conn, rmr, 0, MSG, (void *)WR_RECV));
            it_cq_expect(cq, IBV_WC_RECV, (void *)WR_RECV);
            struct sync_msg m;
            memcpy(&m, rbuf, sizeof(m));
            CHECK_EQ(m.round, r);
            if (m.at_instant) spin_until(m.at_ns);
            CHECK_OK(rpma_conn_disconnect(conn));
            enum rpma_conn_event ev = next_event(conn, p, r, a->server ? "server" : "client");
            if (ev != RPMA_CONN_CLOSED)
                IT_FAIL(
                    "%s round %d (%s): the client got %s (%d), expected RPMA_CONN_CLOSED "
                    "after both sides disconnected at the same moment",
                    p->name, r, m.at_instant ? "at an instant" : "on completion",
                    rpma_utils_conn_event_2str(ev), (int)ev);
            CHECK_OK(rpma_conn_delete(&conn));
        } else if (p->what == RNR_DISC) {
            struct rpma_cq *cq = NULL;
            CHECK_OK(rpma_conn_get_cq(conn, &cq));
            CHECK_OK(rpma_send(conn, rmr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)WR_SEND));
            if (!p->server_ends) {
                usleep(10000); /* the server's responder waits with the send */
                CHECK_OK(rpma_conn_disconnect(conn));
            }
            await_closed(conn, p, r, "client",
                         p->server_ends
                             ? "the server disconnected while this send waited for a receive"
                             : "this side disconnected while its send waited for a receive");
            /* as an application answers CLOSED (on RDMA this sends the DREP the server waits
             * for) */
            if (p->server_ends) CHECK_OK(rpma_conn_disconnect(conn));
            struct ibv_wc wc;
            it_cq_get(cq, &wc);
            if (wc.status == IBV_WC_SUCCESS || wc.wr_id != WR_SEND)
                IT_FAIL(
                    "%s round %d: the send never received completed with status %d, "
                    "wr_id %#llx; expected an error",
                    p->name, r, (int)wc.status, (unsigned long long)wc.wr_id);
            /* kept until the end: the server must get CLOSED while this side lives on (a
             * delete would end the streams, and the server would see that instead) */
            kept[r] = conn;
        } else if (!p->server_ends) {
            if (p->what == RNR_DELETE) {
                /* the server posts no receive: its responder waits with this send */
                CHECK_OK(rpma_send(conn, rmr, 0, MSG, RPMA_F_COMPLETION_ON_ERROR, NULL));
                usleep(10000);
            }
            end_abruptly(&conn, p, r);
        } else {
            expect_closed(&conn, p, r, "client");
        }
    }
    if (p->what != SIMULTANEOUS) {
        struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
        if (p->server_ends)
            it_disconnect_active(&conn);
        else
            it_disconnect_passive(&conn, false);
    }
    printf("client: %s: %d rounds in %lld ms, every live close seen as CLOSED\n", p->name,
           p->rounds, it_now_ms() - t0);
    for (int r = 0; r < p->rounds; r++) {
        if (kept[r]) CHECK_OK(rpma_conn_delete(&kept[r]));
    }
    free(kept);

    CHECK_OK(rpma_mr_dereg(&rmr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(rbuf);
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    alarm(ALARM_S * it_time_scale()); /* the emulated guest runs slower */
    if (a.argc < 1) IT_FAIL("arguments: SCENARIO [ROUNDS]");
    struct plan p = {.name = a.argv[0], .rounds = 100};
    if (strcmp(p.name, "disc_delete_server") == 0) {
        p.what = DISC_DELETE;
        p.server_ends = true;
    } else if (strcmp(p.name, "disc_delete_client") == 0) {
        p.what = DISC_DELETE;
    } else if (strcmp(p.name, "delete_server") == 0) {
        p.what = DELETE_ONLY;
        p.server_ends = true;
    } else if (strcmp(p.name, "delete_client") == 0) {
        p.what = DELETE_ONLY;
    } else if (strcmp(p.name, "simultaneous") == 0) {
        p.what = SIMULTANEOUS;
    } else if (strcmp(p.name, "rnr_delete_client") == 0) {
        p.what = RNR_DELETE;
    } else if (strcmp(p.name, "rnr_disc_server") == 0) {
        p.what = RNR_DISC;
        p.server_ends = true;
    } else if (strcmp(p.name, "rnr_disc_client") == 0) {
        p.what = RNR_DISC;
    } else {
        IT_FAIL("unknown scenario %s", p.name);
    }
    if (a.argc >= 2) p.rounds = atoi(a.argv[1]);
    CHECK(p.rounds > 0 && p.rounds <= 10000);
    if (a.server)
        server(&a, &p);
    else
        client(&a, &p);
    return 0;
}
