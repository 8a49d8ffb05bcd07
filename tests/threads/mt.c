/* SPDX-License-Identifier: BSD-3-Clause */
/* mt.c -- helpers of the multi-threaded tests */
#define _GNU_SOURCE
#include "mt.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>

void mt_set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) IT_FAIL("fcntl: %s", strerror(errno));
}

void mt_run(int n, void *(*fn)(void *)) {
    pthread_t *th = calloc((size_t)n, sizeof(*th));
    int *ids = calloc((size_t)n, sizeof(*ids));
    if (!th || !ids) IT_FAIL("out of memory");
    for (int k = 0; k < n; k++) ids[k] = k;
    mt_start(th, n, fn, ids, sizeof(int));
    mt_join(th, n);
    free(th);
    free(ids);
}

long mt_arg(const struct it_args *a, int k, long def) {
    if (k >= a->argc) return def;
    char *end = NULL;
    long v = strtol(a->argv[k], &end, 10);
    if (!end || *end || v <= 0) IT_FAIL("bad argument %d: %s", k, a->argv[k]);
    return v;
}

struct rpma_conn_req *mt_next_req(struct rpma_ep *ep, int ep_fd, struct rpma_conn_cfg *cfg,
                                  atomic_long *accepted, long total, pthread_mutex_t *api_lock) {
    long long deadline = it_now_ms() + 30000;
    for (;;) {
        if (atomic_load(accepted) >= total) return NULL;
        if (it_now_ms() > deadline) IT_FAIL("server: no connection request within 30 s");
        struct pollfd p = {.fd = ep_fd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0) continue;
        pthread_mutex_lock(api_lock);
        struct rpma_conn_req *req = NULL;
        int ret = rpma_ep_next_conn_req(ep, cfg, &req);
        /* another thread took it; the reference says RPMA_E_PROVIDER there (rdma_get_cm_event
         * fails with EAGAIN), not the documented RPMA_E_NO_EVENT */
        if (ret == RPMA_E_NO_EVENT || (it_reference() && ret == RPMA_E_PROVIDER)) {
            pthread_mutex_unlock(api_lock);
            continue;
        }
        if (ret) IT_FAIL("rpma_ep_next_conn_req returned %d (%s)", ret, rpma_err_2str(ret));
        atomic_fetch_add(accepted, 1);
        pthread_mutex_unlock(api_lock);
        return req;
    }
}

void mt_answer_server(const struct it_args *a, int messages, size_t len,
                      void (*after_accept)(struct rpma_ep *ep)) {
    enum { WR_SEND = 0x5e, WR_RECV = 0x7e };
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *buf = it_alloc(2 * len);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, 2 * len, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &mr));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn_req *req = it_next_req(ep, NULL);
    CHECK_OK(rpma_conn_req_recv(req, mr, len, len, (void *)WR_RECV));
    struct rpma_conn *conn = it_accept(&req, NULL, 0);
    if (after_accept) after_accept(ep);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    for (int r = 0; r < messages; r++) {
        it_cq_expect(cq, IBV_WC_RECV, (void *)WR_RECV);
        CHECK_OK(rpma_recv(conn, mr, len, len, (void *)WR_RECV));
        memcpy(buf, &r, sizeof(r));
        CHECK_OK(rpma_send(conn, mr, 0, len, RPMA_F_COMPLETION_ALWAYS, (void *)WR_SEND));
        it_cq_expect(cq, IBV_WC_SEND, (void *)WR_SEND);
    }
    it_disconnect_passive(&conn, false);
    printf("server: %d messages answered\n", messages);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
}

void mt_rcq_client_open(const struct it_args *a, size_t len, int slots, struct mt_rcq_client *c) {
    c->peer = it_peer_new(a->addr, false);
    c->buf = it_alloc(2 * len);
    c->mr = NULL;
    CHECK_OK(
        rpma_mr_reg(c->peer, c->buf, 2 * len, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &c->mr));
    c->cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&c->cfg));
    CHECK_OK(rpma_conn_cfg_set_rcq_size(c->cfg, (uint32_t)slots));
    CHECK_OK(rpma_conn_cfg_set_rq_size(c->cfg, (uint32_t)slots));
    c->conn = it_connect(c->peer, a->addr, a->port, c->cfg, NULL, 0);
    c->cq = c->rcq = NULL;
    CHECK_OK(rpma_conn_get_cq(c->conn, &c->cq));
    CHECK_OK(rpma_conn_get_rcq(c->conn, &c->rcq));
}

void mt_rcq_client_close(struct mt_rcq_client *c) {
    it_disconnect_active(&c->conn);
    CHECK_OK(rpma_conn_cfg_delete(&c->cfg));
    CHECK_OK(rpma_mr_dereg(&c->mr));
    CHECK_OK(rpma_peer_delete(&c->peer));
    free(c->buf);
}
