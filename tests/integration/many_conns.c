/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * many_conns.c -- 16 connections from one client process to one server, set up concurrently.
 * Each carries its own private data both ways (echoed back, so a mix-up shows), writes its own
 * slice of the server's region and reads it back; the server checks every slice at the end.
 * The client's connections hold no more descriptors each than docs/tcp-provider.md says: 4 over
 * tcp, 7 over shm, 2 over RDMA (the reference and rpma's verbs: rdma_cm's channel and the
 * completion channel).
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define CONNS 16
#define SLICE 4096
#define OFF_K IT_MR_DESC_SIZE
#define OFF_ECHO (IT_MR_DESC_SIZE + 1)
#define PDATA_LEN (IT_MR_DESC_SIZE + 2)

static uint64_t seed(int k, int j) {
    return 0xaa00 + (uint64_t)k * 64 + (uint64_t)j;
}

/* the most descriptors one connection of this client may hold */
static int fds_per_conn(void) {
    if (it_nic()) return 2;
    const char *p = getenv("RPMA_PROVIDER");
    return p && strcmp(p, "tcp") == 0 ? 4 : 7;
}

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *buf = it_alloc(CONNS * SLICE);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, CONNS * SLICE, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC,
                         &mr));
    char pdata[PDATA_LEN];
    CHECK_OK(rpma_mr_get_descriptor(mr, pdata));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();

    struct rpma_conn *conns[CONNS];
    int client_id[CONNS];
    bool id_seen[CONNS] = {false};
    for (int k = 0; k < CONNS; k++) {
        struct rpma_conn_req *req = it_next_req(ep, NULL);
        struct rpma_conn_private_data pd = {0};
        CHECK_OK(rpma_conn_req_get_private_data(req, &pd));
        CHECK_EQ(pd.len, IT_PDATA_CONNECT);
        int j = *(unsigned char *)pd.ptr;
        CHECK(j < CONNS && !id_seen[j]);
        id_seen[j] = true;
        client_id[k] = j;
        pdata[OFF_K] = (char)k;
        pdata[OFF_ECHO] = (char)j;
        conns[k] = it_accept(&req, pdata, sizeof(pdata));
    }
    for (int k = 0; k < CONNS; k++) it_disconnect_passive(&conns[k], false);
    for (int k = 0; k < CONNS; k++) {
        long bad = it_verify(buf + k * SLICE, SLICE, seed(k, client_id[k]));
        if (bad >= 0)
            IT_FAIL("slice %d (client connection %d) differs at byte %ld", k, client_id[k], bad);
    }
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *src = it_alloc(CONNS * SLICE), *dst = it_alloc(CONNS * SLICE);
    struct rpma_mr_local *smr = NULL, *dmr = NULL;
    CHECK_OK(rpma_mr_reg(peer, src, CONNS * SLICE, RPMA_MR_USAGE_WRITE_SRC, &smr));
    CHECK_OK(rpma_mr_reg(peer, dst, CONNS * SLICE, RPMA_MR_USAGE_READ_DST, &dmr));

    /* All requests go out before any is established. Descriptors are counted from the second
     * connection on: the first may start the library's own (tcp and shm: the progress engine's
     * epoll set and wake-up eventfd). */
    int fds_before = 0;
    struct rpma_conn *conns[CONNS];
    for (int j = 0; j < CONNS; j++) {
        if (j == 1) fds_before = it_open_fds();
        struct rpma_conn_req *req = NULL;
        CHECK_OK(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
        unsigned char id = (unsigned char)j;
        struct rpma_conn_private_data pd = {.ptr = &id, .len = 1};
        CHECK_OK(rpma_conn_req_connect(&req, &pd, &conns[j]));
    }
    /* Each ESTABLISHED is taken as it comes, over all the connections at once: over RDMA the
     * client's rdma_cm sends a connection's RTU only once the client reads its event, and the
     * server accepts (and waits for) the requests in the order they reached it, which need not
     * be the order they were sent in. */
    bool established[CONNS] = {false};
    for (int left = CONNS; left > 0;) {
        struct pollfd fds[CONNS];
        int idx[CONNS], n = 0;
        for (int j = 0; j < CONNS; j++) {
            if (established[j]) continue;
            CHECK_OK(rpma_conn_get_event_fd(conns[j], &fds[n].fd));
            fds[n].events = POLLIN;
            idx[n++] = j;
        }
        int ready = poll(fds, (nfds_t)n, IT_WAIT_MS);
        if (ready == 0) IT_FAIL("no connection event within %d ms", IT_WAIT_MS);
        CHECK(ready > 0);
        for (int i = 0; i < n; i++) {
            if (!fds[i].revents) continue;
            it_expect_event(conns[idx[i]], RPMA_CONN_ESTABLISHED);
            established[idx[i]] = true;
            left--;
        }
    }
    int held = it_open_fds() - fds_before;
    if (held > (CONNS - 1) * fds_per_conn())
        IT_FAIL("%d connections hold %d descriptors, more than %d each", CONNS - 1, held,
                fds_per_conn());
    printf("client: %d connections hold %d descriptors\n", CONNS - 1, held);
    struct rpma_mr_remote *remote[CONNS];
    int slice[CONNS];
    bool slice_seen[CONNS] = {false};
    for (int j = 0; j < CONNS; j++) {
        struct rpma_conn_private_data pd = {0};
        CHECK_OK(rpma_conn_get_private_data(conns[j], &pd));
        CHECK_EQ(pd.len, IT_PDATA_ACCEPT);
        CHECK_EQ(((unsigned char *)pd.ptr)[OFF_ECHO], j);
        int k = ((unsigned char *)pd.ptr)[OFF_K];
        CHECK(k < CONNS && !slice_seen[k]);
        slice_seen[k] = true;
        slice[j] = k;
        remote[j] = it_remote_mr(conns[j], 0);
        it_fill(src + k * SLICE, SLICE, seed(k, j));
    }

    /* every connection writes its slice, all at once; then every one reads it back */
    for (int j = 0; j < CONNS; j++) {
        size_t off = (size_t)slice[j] * SLICE;
        CHECK_OK(rpma_write(conns[j], remote[j], off, smr, off, SLICE, RPMA_F_COMPLETION_ALWAYS,
                            (void *)(uintptr_t)(0x100 + j)));
    }
    for (int j = 0; j < CONNS; j++) {
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conns[j], &cq));
        it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)(uintptr_t)(0x100 + j));
    }
    for (int j = 0; j < CONNS; j++) {
        size_t off = (size_t)slice[j] * SLICE;
        CHECK_OK(rpma_read(conns[j], dmr, off, remote[j], off, SLICE, RPMA_F_COMPLETION_ALWAYS,
                           (void *)(uintptr_t)(0x200 + j)));
    }
    for (int j = 0; j < CONNS; j++) {
        struct rpma_cq *cq = NULL;
        CHECK_OK(rpma_conn_get_cq(conns[j], &cq));
        it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)(uintptr_t)(0x200 + j));
        it_cq_expect_empty(cq);
        CHECK_EQ(it_verify(dst + slice[j] * SLICE, SLICE, seed(slice[j], j)), -1);
    }

    for (int j = 0; j < CONNS; j++) {
        CHECK_OK(rpma_mr_remote_delete(&remote[j]));
        CHECK_OK(rpma_conn_disconnect(conns[j]));
    }
    for (int j = 0; j < CONNS; j++) {
        it_expect_event(conns[j], RPMA_CONN_CLOSED);
        CHECK_OK(rpma_conn_delete(&conns[j]));
    }
    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_mr_dereg(&dmr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(src);
    free(dst);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
