/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hostile_server.c -- a librpma server for the hostile-peer tests, using the public API only.
 *
 * usage: hostile_server ADDR PORT
 *
 * It listens, accepts every connection request, and keeps serving until a client sends "QUIT".
 * Each connection gets in its accept private data: the descriptor of a region registered with all
 * usages (offset 0), of a READ_SRC-only region (offset 21) and a peer cfg with direct write to
 * pmem (offset 42). The all-usage region sits between two guard areas of the same allocation.
 * Legitimate clients write only its first 4 KiB ("legit window"); raw clients may place valid
 * writes in the next 4 KiB ("scratch window"). Everything else, the guards and the whole read-only
 * region must keep their initial pattern whatever any client does.
 *
 * A client sends "CHECK" (rpma_send) and gets back a line of counters and the result of that
 * memory check; "QUIT" ends the server once that client disconnects. The server exits 0 only if
 * every check it ever ran passed and the teardown succeeded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common.h"
#include "hostile_proto.h"

#define MAX_CONNS 1024
#define MSG_SLOT 128 /* per connection: receive at 0, reply at 64 */

struct slot {
    struct rpma_conn *conn;
    int ev_fd, cq_fd;
    bool established;
};

static struct {
    struct rpma_peer *peer;
    struct rpma_ep *ep;
    char *alloc; /* guard | region | guard */
    char *pristine;
    char *ro;
    char *ro_pristine;
    char *msgs;
    struct rpma_mr_local *mr, *ro_mr, *msg_mr;
    char pdata[HS_PDATA_LEN];
    int epfd;
    struct slot slots[MAX_CONNS];
    int live;
    unsigned long reqs, established, lost, closed, other_events, full;
    bool quitting, failed;
    int quit_slot;
} S;

/* epoll tags: the listener, or slot index * 2 + (0 event fd, 1 cq fd) */
#define TAG_EP UINT64_MAX

static void ep_add(int fd, uint64_t tag) {
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = tag};
    if (epoll_ctl(S.epfd, EPOLL_CTL_ADD, fd, &e) != 0) IT_FAIL("epoll add: %s", strerror(errno));
}

/* where the memory differs from its initial pattern outside what clients may write; -1 if not */
static long mem_check(const char **what) {
    for (size_t i = 0; i < HS_ALLOC; i++) {
        bool region = i >= HS_GUARD && i < HS_GUARD + HS_REGION;
        size_t off = i - HS_GUARD;
        if (region && off < HS_LEGIT + HS_SCRATCH) continue;
        if (S.alloc[i] != S.pristine[i]) {
            *what = region ? "region" : (i < HS_GUARD ? "low guard" : "high guard");
            return (long)i;
        }
    }
    for (size_t i = 0; i < HS_RO; i++)
        if (S.ro[i] != S.ro_pristine[i]) {
            *what = "read-only region";
            return (long)i;
        }
    return -1;
}

static void drop_conn(int i, bool disconnect) {
    struct slot *s = &S.slots[i];
    epoll_ctl(S.epfd, EPOLL_CTL_DEL, s->ev_fd, NULL);
    epoll_ctl(S.epfd, EPOLL_CTL_DEL, s->cq_fd, NULL);
    if (disconnect) (void)rpma_conn_disconnect(s->conn); /* the peer may be gone already */
    int ret = rpma_conn_delete(&s->conn);
    if (ret) {
        fprintf(stderr, "hostile_server: rpma_conn_delete: %s\n", rpma_err_2str(ret));
        S.failed = true;
    }
    memset(s, 0, sizeof(*s));
    S.live--;
}

static void on_request(void) {
    struct rpma_conn_req *req = NULL;
    int ret = rpma_ep_next_conn_req(S.ep, NULL, &req);
    if (ret == RPMA_E_NO_EVENT) return;
    if (ret) IT_FAIL("rpma_ep_next_conn_req: %s", rpma_err_2str(ret));
    S.reqs++;
    int i = 0;
    while (i < MAX_CONNS && S.slots[i].conn) i++;
    if (i == MAX_CONNS) {
        S.full++;
        CHECK_OK(rpma_conn_req_delete(&req));
        return;
    }
    ret = rpma_conn_req_recv(req, S.msg_mr, (size_t)i * MSG_SLOT, HS_MSG_LEN, NULL);
    if (ret) fprintf(stderr, "hostile_server: rpma_conn_req_recv: %s\n", rpma_err_2str(ret));
    struct rpma_conn_private_data pd = {.ptr = S.pdata, .len = HS_PDATA_LEN};
    struct slot *s = &S.slots[i];
    /* a hostile client may be gone already: a failed accept is its problem, not ours */
    ret = rpma_conn_req_connect(&req, &pd, &s->conn);
    if (ret) {
        fprintf(stderr, "hostile_server: rpma_conn_req_connect: %s\n", rpma_err_2str(ret));
        s->conn = NULL;
        return;
    }
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_event_fd(s->conn, &s->ev_fd));
    CHECK_OK(rpma_conn_get_cq(s->conn, &cq));
    CHECK_OK(rpma_cq_get_fd(cq, &s->cq_fd));
    ep_add(s->ev_fd, (uint64_t)i * 2);
    ep_add(s->cq_fd, (uint64_t)i * 2 + 1);
    S.live++;
}

static void on_event(int i) {
    struct slot *s = &S.slots[i];
    enum rpma_conn_event ev;
    int ret = rpma_conn_next_event(s->conn, &ev);
    if (ret == RPMA_E_NO_EVENT) return;
    if (ret) IT_FAIL("rpma_conn_next_event: %s", rpma_err_2str(ret));
    switch (ev) {
        case RPMA_CONN_ESTABLISHED:
            S.established++;
            s->established = true;
            break;
        case RPMA_CONN_CLOSED:
            S.closed++;
            drop_conn(i, true);
            break;
        case RPMA_CONN_LOST:
            S.lost++;
            drop_conn(i, true);
            break;
        default:
            S.other_events++;
            fprintf(stderr, "hostile_server: unexpected event %s\n",
                    rpma_utils_conn_event_2str(ev));
            S.failed = true;
            drop_conn(i, true);
    }
}

static void answer(int i, const char *cmd) {
    char *reply = S.msgs + (size_t)i * MSG_SLOT + 64;
    memset(reply, 0, 64);
    if (strcmp(cmd, "CHECK") == 0 || strcmp(cmd, "QUIT") == 0) {
        const char *what = "";
        long bad = mem_check(&what);
        if (bad >= 0) {
            fprintf(stderr, "hostile_server: %s changed at allocation offset %ld\n", what, bad);
            S.failed = true;
        }
        /* hs_stats_parse reads this line back */
        snprintf(reply, 64, "%s %lu %lu %lu %lu %d %d %ld", bad < 0 ? "OK" : "BAD", S.reqs,
                 S.established, S.lost, S.closed, S.live, it_open_fds(), bad);
        if (strcmp(cmd, "QUIT") == 0) {
            S.quitting = true;
            S.quit_slot = i;
        }
    } else {
        snprintf(reply, 64, "?");
    }
    int ret = rpma_send(S.slots[i].conn, S.msg_mr, (size_t)i * MSG_SLOT + 64, HS_MSG_LEN,
                        RPMA_F_COMPLETION_ALWAYS, NULL);
    if (ret) fprintf(stderr, "hostile_server: rpma_send: %s\n", rpma_err_2str(ret));
}

static void on_cq(int i) {
    struct slot *s = &S.slots[i];
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(s->conn, &cq));
    int ret = rpma_cq_wait(cq);
    if (ret && ret != RPMA_E_NO_COMPLETION) IT_FAIL("rpma_cq_wait: %s", rpma_err_2str(ret));
    for (;;) {
        struct ibv_wc wc;
        int got = 0;
        ret = rpma_cq_get_wc(cq, 1, &wc, &got);
        if (ret == RPMA_E_NO_COMPLETION) return;
        if (ret) IT_FAIL("rpma_cq_get_wc: %s", rpma_err_2str(ret));
        /* hostile connections end in error states: their failed completions are expected */
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) continue;
        char cmd[HS_MSG_LEN + 1];
        memcpy(cmd, S.msgs + (size_t)i * MSG_SLOT, HS_MSG_LEN);
        cmd[HS_MSG_LEN] = '\0';
        ret = rpma_recv(s->conn, S.msg_mr, (size_t)i * MSG_SLOT, HS_MSG_LEN, NULL);
        if (ret) continue; /* the queue pair is in error: nothing more will arrive */
        answer(i, cmd);
    }
}

static void setup(const char *addr, const char *port) {
    S.alloc = it_alloc(HS_ALLOC);
    it_fill(S.alloc, HS_ALLOC, 0x5eed1);
    S.pristine = malloc(HS_ALLOC);
    CHECK(S.pristine != NULL);
    memcpy(S.pristine, S.alloc, HS_ALLOC);
    S.ro = it_alloc(HS_RO);
    it_fill(S.ro, HS_RO, 0x5eed2);
    S.ro_pristine = malloc(HS_RO);
    CHECK(S.ro_pristine != NULL);
    memcpy(S.ro_pristine, S.ro, HS_RO);
    S.msgs = it_alloc((size_t)MAX_CONNS * MSG_SLOT);

    S.peer = it_peer_new(addr, true);
    int all = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC |
              RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
              RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV;
    CHECK_OK(rpma_mr_reg(S.peer, S.alloc + HS_GUARD, HS_REGION, all, &S.mr));
    CHECK_OK(rpma_mr_reg(S.peer, S.ro, HS_RO, RPMA_MR_USAGE_READ_SRC, &S.ro_mr));
    CHECK_OK(rpma_mr_reg(S.peer, S.msgs, (size_t)MAX_CONNS * MSG_SLOT,
                         RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &S.msg_mr));
    CHECK_OK(rpma_mr_get_descriptor(S.mr, S.pdata + HS_OFF_MR));
    CHECK_OK(rpma_mr_get_descriptor(S.ro_mr, S.pdata + HS_OFF_RO));
    struct rpma_peer_cfg *pcfg = NULL;
    CHECK_OK(rpma_peer_cfg_new(&pcfg));
    CHECK_OK(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true));
    CHECK_OK(rpma_peer_cfg_get_descriptor(pcfg, S.pdata + HS_OFF_PCFG));
    CHECK_OK(rpma_peer_cfg_delete(&pcfg));

    S.epfd = epoll_create1(EPOLL_CLOEXEC);
    CHECK(S.epfd >= 0);
    CHECK_OK(rpma_ep_listen(S.peer, addr, port, &S.ep));
    int fd = -1;
    CHECK_OK(rpma_ep_get_fd(S.ep, &fd));
    ep_add(fd, TAG_EP);
}

static void teardown(void) {
    for (int i = 0; i < MAX_CONNS; i++)
        if (S.slots[i].conn) drop_conn(i, true);
    CHECK_OK(rpma_ep_shutdown(&S.ep));
    CHECK_OK(rpma_mr_dereg(&S.mr));
    CHECK_OK(rpma_mr_dereg(&S.ro_mr));
    CHECK_OK(rpma_mr_dereg(&S.msg_mr));
    CHECK_OK(rpma_peer_delete(&S.peer));
    close(S.epfd);
}

int main(int argc, char *argv[]) {
    /* the server outlives many clients: its own backstop is the runner's timeout, not an alarm */
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_ERROR));
    if (argc != 3) {
        fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]);
        return 2;
    }
    setup(argv[1], argv[2]);
    it_ready();
    for (;;) {
        struct epoll_event evs[64];
        int n = epoll_wait(S.epfd, evs, 64, 1000);
        if (n < 0) {
            if (errno == EINTR) continue;
            IT_FAIL("epoll_wait: %s", strerror(errno));
        }
        for (int k = 0; k < n; k++) {
            uint64_t tag = evs[k].data.u64;
            if (tag == TAG_EP) {
                on_request();
                continue;
            }
            int i = (int)(tag / 2);
            if (!S.slots[i].conn) continue; /* dropped earlier in this batch */
            if (tag & 1)
                on_cq(i);
            else
                on_event(i);
        }
        /* the quitting client got its answer and disconnected: its slot is free again */
        if (S.quitting && !S.slots[S.quit_slot].conn) break;
    }
    teardown();
    printf("hostile_server: requests %lu established %lu lost %lu closed %lu full %lu\n", S.reqs,
           S.established, S.lost, S.closed, S.full);
    return S.failed ? 1 : 0;
}
