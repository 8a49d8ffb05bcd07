/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 06-multiple-connections/server.c -- one epoll loop serves up to 10 clients at a time and
 * rejects a request when every slot is taken. For each client it reads the client's hello
 * (rpma_read, with the client's memory descriptor taken from the request's private data) and
 * answers with a message (rpma_send).
 *
 * Completions are waited for in one of two ways:
 *   cq     - the CQ's own fd, then rpma_cq_wait (the default)
 *   shared - a completion channel shared by the connection's CQs
 *            (rpma_conn_cfg_set_compl_channel), then rpma_conn_wait, which names the CQ that fired
 *
 * usage: server ADDR PORT [REQUESTS [cq|shared]]
 *   the server ends after REQUESTS connection requests (default 11) once all its clients left
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common.h"

#define SLOTS 10
#define MSG 64

enum kind { KIND_EP, KIND_EVENT, KIND_COMPL };

struct slot {
    bool used;
    struct rpma_conn *conn;
    struct rpma_mr_remote *hello_mr; /* the client's hello */
    int event_fd, compl_fd;
};

struct server {
    bool shared;
    int epfd;
    struct rpma_mr_local *mr; /* per slot: MSG bytes read, then MSG bytes to send */
    char *buf;
    struct slot slots[SLOTS];
    int active;
};

static void set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
        EX_FAIL("fcntl(O_NONBLOCK): %s", strerror(errno));
}

/* watches fd for input, remembering what it is and which slot it belongs to */
static void watch(struct server *s, int fd, enum kind kind, int slot) {
    set_nonblocking(fd);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)kind << 16 | (uint32_t)slot};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) EX_FAIL("epoll_ctl: %s", strerror(errno));
}

static void unwatch(struct server *s, int fd) {
    if (epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL) != 0) EX_FAIL("epoll_ctl: %s", strerror(errno));
}

/* accepts req into a free slot, or rejects it when there is none */
static void handle_request(struct server *s, struct rpma_conn_req *req, int number) {
    int i = 0;
    while (i < SLOTS && s->slots[i].used) i++;
    if (i == SLOTS) {
        /* deleting an incoming request rejects it */
        EX_CHECK(rpma_conn_req_delete(&req));
        printf("request #%d: all %d slots are taken, rejected\n", number, SLOTS);
        return;
    }
    struct slot *sl = &s->slots[i];
    struct rpma_conn_private_data pd = {0};
    EX_CHECK(rpma_conn_req_get_private_data(req, &pd));
    if (pd.len == 0) EX_FAIL("request #%d carries no memory descriptor", number);
    EX_CHECK(rpma_mr_remote_from_descriptor(pd.ptr, pd.len, &sl->hello_mr));
    EX_CHECK(rpma_conn_req_connect(&req, NULL, &sl->conn));

    EX_CHECK(rpma_conn_get_event_fd(sl->conn, &sl->event_fd));
    if (s->shared) {
        EX_CHECK(rpma_conn_get_compl_fd(sl->conn, &sl->compl_fd));
    } else {
        struct rpma_cq *cq = NULL;
        EX_CHECK(rpma_conn_get_cq(sl->conn, &cq));
        EX_CHECK(rpma_cq_get_fd(cq, &sl->compl_fd));
    }
    watch(s, sl->event_fd, KIND_EVENT, i);
    watch(s, sl->compl_fd, KIND_COMPL, i);
    sl->used = true;
    s->active++;
    printf("request #%d: accepted into slot %d (%d of %d slots taken)\n", number, i, s->active,
           SLOTS);
}

static void free_slot(struct server *s, int i) {
    struct slot *sl = &s->slots[i];
    unwatch(s, sl->event_fd);
    unwatch(s, sl->compl_fd);
    EX_CHECK(rpma_conn_disconnect(sl->conn));
    EX_CHECK(rpma_conn_delete(&sl->conn));
    EX_CHECK(rpma_mr_remote_delete(&sl->hello_mr));
    sl->used = false;
    s->active--;
}

static void handle_events(struct server *s, int i) {
    struct slot *sl = &s->slots[i];
    enum rpma_conn_event ev;
    /* one event per readiness of the level-triggered fd: once it is drained, upstream librpma
     * gives RPMA_E_PROVIDER where rpma gives RPMA_E_NO_EVENT */
    EX_CHECK(rpma_conn_next_event(sl->conn, &ev));
    if (ev == RPMA_CONN_ESTABLISHED) {
        /* fetch the client's hello into this slot's buffer */
        EX_CHECK(rpma_read(sl->conn, s->mr, (size_t)i * 2 * MSG, sl->hello_mr, 0, MSG,
                           RPMA_F_COMPLETION_ALWAYS, NULL));
    } else if (ev == RPMA_CONN_CLOSED || ev == RPMA_CONN_LOST) {
        free_slot(s, i);
        printf("slot %d: client left (%s); %d slots taken\n", i, rpma_utils_conn_event_2str(ev),
               s->active);
    } else {
        EX_FAIL("slot %d: unexpected event %s", i, rpma_utils_conn_event_2str(ev));
    }
}

static void handle_completions(struct server *s, int i) {
    struct slot *sl = &s->slots[i];
    struct rpma_cq *cq = NULL;
    int ret;
    if (s->shared) {
        /* one fd for the connection's CQs: rpma_conn_wait says which one fired */
        bool is_rcq = false;
        ret = rpma_conn_wait(sl->conn, 0, &cq, &is_rcq);
        if (ret == RPMA_E_NO_COMPLETION) return;
        EX_CHECK(ret);
        EX_ASSERT(!is_rcq); /* these connections have no receive CQ */
    } else {
        EX_CHECK(rpma_conn_get_cq(sl->conn, &cq));
        ret = rpma_cq_wait(cq);
        if (ret == RPMA_E_NO_COMPLETION) return;
        EX_CHECK(ret);
    }
    struct ibv_wc wc;
    while ((ret = rpma_cq_get_wc(cq, 1, &wc, NULL)) == 0) {
        if (wc.status != IBV_WC_SUCCESS)
            EX_FAIL("slot %d: operation failed with status %d", i, (int)wc.status);
        char *hello = s->buf + (size_t)i * 2 * MSG, *reply = hello + MSG;
        if (wc.opcode == IBV_WC_RDMA_READ) {
            hello[MSG - 1] = '\0';
            printf("slot %d: read \"%s\"\n", i, hello);
            snprintf(reply, MSG, "slot %d got your hello", i);
            EX_CHECK(rpma_send(sl->conn, s->mr, (size_t)(reply - s->buf), MSG,
                               RPMA_F_COMPLETION_ALWAYS, NULL));
        } else if (wc.opcode == IBV_WC_SEND) {
            printf("slot %d: answer sent\n", i);
        } else {
            EX_FAIL("slot %d: unexpected completion opcode %d", i, (int)wc.opcode);
        }
    }
    if (ret != RPMA_E_NO_COMPLETION) EX_CHECK(ret);
}

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3 || (argc > 4 && strcmp(argv[4], "cq") != 0 && strcmp(argv[4], "shared") != 0)) {
        fprintf(stderr, "usage: %s ADDR PORT [REQUESTS [cq|shared]]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    int requests = argc > 3 ? atoi(argv[3]) : 11;
    struct server s = {.shared = argc > 4 && strcmp(argv[4], "shared") == 0};
    if (requests < 1) EX_FAIL("REQUESTS must be positive");

    struct rpma_peer *peer = ex_peer_new(addr, true);
    s.buf = ex_malloc(SLOTS * 2 * MSG);
    EX_CHECK(rpma_mr_reg(peer, s.buf, SLOTS * 2 * MSG, RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_SEND,
                         &s.mr));
    struct rpma_conn_cfg *cfg = NULL;
    EX_CHECK(rpma_conn_cfg_new(&cfg));
    EX_CHECK(rpma_conn_cfg_set_compl_channel(cfg, s.shared));

    s.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s.epfd < 0) EX_FAIL("epoll_create1: %s", strerror(errno));
    struct rpma_ep *ep = ex_listen(peer, addr, port);
    int ep_fd = -1;
    EX_CHECK(rpma_ep_get_fd(ep, &ep_fd));
    watch(&s, ep_fd, KIND_EP, 0);
    printf(
        "%d slots; completions through %s\n", SLOTS,
        s.shared ? "a shared completion channel (rpma_conn_wait)" : "each CQ's fd (rpma_cq_wait)");

    int seen = 0;
    while (seen < requests || s.active > 0) {
        struct epoll_event evs[16];
        int n = epoll_wait(s.epfd, evs, 16, EX_WAIT_MS);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) EX_FAIL("epoll_wait: %s", strerror(errno));
        if (n == 0) EX_FAIL("nothing happened for %d ms", EX_WAIT_MS);
        for (int e = 0; e < n; e++) {
            enum kind kind = (enum kind)(evs[e].data.u32 >> 16);
            int i = (int)(evs[e].data.u32 & 0xffff);
            if (kind == KIND_EP) {
                struct rpma_conn_req *req = NULL;
                /* one request per readiness: upstream librpma gives RPMA_E_PROVIDER, not the
                 * documented RPMA_E_NO_EVENT, once the fd is drained */
                EX_CHECK(rpma_ep_next_conn_req(ep, cfg, &req));
                handle_request(&s, req, ++seen);
            } else if (!s.slots[i].used) {
                continue; /* the slot was freed earlier in this batch */
            } else if (kind == KIND_EVENT) {
                handle_events(&s, i);
            } else {
                handle_completions(&s, i);
            }
        }
    }
    printf("served %d requests\n", seen);

    unwatch(&s, ep_fd);
    close(s.epfd);
    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_conn_cfg_delete(&cfg));
    EX_CHECK(rpma_mr_dereg(&s.mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(s.buf);
    return 0;
}
