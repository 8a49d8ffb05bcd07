/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pdata.c -- private data as RDMA CM delivers it (issue 19). Black-box (librpma.h only): it
 * expects what the reference librpma reports over soft-RoCE.
 *
 * Whatever the other side sent (nothing, or fewer bytes than fit), the server's request and
 * connection show 56 bytes and the client's connection 196: the bytes sent first, zeros after,
 * never a NULL pointer. The client's connection shows nothing (NULL, 0) until the application
 * has taken the ESTABLISHED event, even when that event is already waiting. The server's
 * connection holds the request's bytes where rpma_conn_req_get_private_data showed them (freed
 * with the request on rpma's verbs provider until 2026-11-27: a use after free under ASan).
 *
 * Modes (the argument after PORT):
 *   none   neither side passes private data
 *   short  the client sends 5 bytes, the server 7
 *   over   each side first passes one byte more than fits (57, 197): rpma_conn_req_connect fails
 *          with RPMA_E_PROVIDER, as rdma_connect and rdma_accept refuse it, and frees the request
 *          (the client's never reaches the server; the server's ends the client's connection as
 *          REJECTED); then both pass as much as fits (56, 196)
 */
#define _GNU_SOURCE
#include <string.h>

#include "common.h"

#define CLIENT_LEN 5
#define SERVER_LEN 7
#define CLIENT_MAX IT_PDATA_CONNECT
#define SERVER_MAX IT_PDATA_ACCEPT
#define SEED_CLIENT 0xda7a
#define SEED_SERVER 0x5e7d

/* pd holds exactly `size` bytes: the `sent` bytes made from seed, then zeros */
static void check_pdata(const struct rpma_conn_private_data *pd, size_t size, size_t sent,
                        uint64_t seed) {
    CHECK(pd->ptr != NULL);
    CHECK_EQ(pd->len, size);
    const unsigned char *p = pd->ptr;
    long bad = it_verify(p, sent, seed);
    if (bad >= 0) IT_FAIL("private data differs at byte %ld", bad);
    for (size_t i = sent; i < size; i++)
        if (p[i] != 0) IT_FAIL("private data byte %zu is %u, expected 0", i, p[i]);
}

/* rpma_conn_req_connect with len bytes of pdata, one more than fit: refused, *req freed */
static void connect_too_long(struct rpma_conn_req **req, void *pdata, size_t len) {
    struct rpma_conn_private_data pd = {.ptr = pdata, .len = (uint8_t)len};
    struct rpma_conn *conn = NULL;
    int ret = rpma_conn_req_connect(req, &pd, &conn);
    if (ret != RPMA_E_PROVIDER)
        IT_FAIL(
            "rpma_conn_req_connect with %zu bytes of private data returned %d (%s), "
            "expected RPMA_E_PROVIDER",
            len, ret, rpma_err_2str(ret));
    CHECK(*req == NULL && conn == NULL);
}

static void server(const struct it_args *a, size_t client_len, size_t server_len) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();

    char spd[SERVER_MAX + 1];
    it_fill(spd, sizeof(spd), SEED_SERVER);
    struct rpma_conn_req *req = it_next_req(ep, NULL);
    if (server_len == SERVER_MAX) {
        connect_too_long(&req, spd, SERVER_MAX + 1);
        req = it_next_req(ep, NULL);
    }
    struct rpma_conn_private_data pd = {0};
    CHECK_OK(rpma_conn_req_get_private_data(req, &pd));
    check_pdata(&pd, IT_PDATA_CONNECT, client_len, SEED_CLIENT);
    struct rpma_conn_private_data shown = pd;

    struct rpma_conn *conn = it_accept(&req, server_len ? spd : NULL, server_len);
    memset(&pd, 0, sizeof(pd));
    CHECK_OK(rpma_conn_get_private_data(conn, &pd));
    check_pdata(&pd, IT_PDATA_CONNECT, client_len, SEED_CLIENT);
    /* the connection holds the request's bytes where they were shown (the reference does so) */
    if (pd.ptr != shown.ptr)
        IT_FAIL("the connection's private data moved from where the request showed it");
    check_pdata(&shown, IT_PDATA_CONNECT, client_len, SEED_CLIENT);

    it_disconnect_passive(&conn, false);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_peer_delete(&peer));
}

static void client(const struct it_args *a, size_t client_len, size_t server_len) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char cpd[CLIENT_MAX + 1];
    it_fill(cpd, sizeof(cpd), SEED_CLIENT);
    struct rpma_conn_private_data pd = {.ptr = cpd, .len = (uint8_t)client_len};
    struct rpma_conn_req *req = NULL;
    struct rpma_conn *conn = NULL;
    if (client_len == CLIENT_MAX) {
        CHECK_OK(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
        connect_too_long(&req, cpd, CLIENT_MAX + 1);
        /* this one the server refuses to accept */
        CHECK_OK(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
        CHECK_OK(rpma_conn_req_connect(&req, &pd, &conn));
        it_expect_event(conn, RPMA_CONN_REJECTED);
        CHECK_OK(rpma_conn_delete(&conn));
    }
    CHECK_OK(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
    CHECK_OK(rpma_conn_req_connect(&req, client_len ? &pd : NULL, &conn));

    /* ESTABLISHED waits in the event fd; until it is taken the connection shows nothing */
    int fd = -1;
    CHECK_OK(rpma_conn_get_event_fd(conn, &fd));
    if (!it_poll_fd(fd, IT_WAIT_MS)) IT_FAIL("no connection event within %d ms", IT_WAIT_MS);
    struct rpma_conn_private_data got = {.ptr = cpd, .len = 1};
    CHECK_OK(rpma_conn_get_private_data(conn, &got));
    CHECK(got.ptr == NULL);
    CHECK_EQ(got.len, 0);

    it_expect_event(conn, RPMA_CONN_ESTABLISHED);
    CHECK_OK(rpma_conn_get_private_data(conn, &got));
    check_pdata(&got, IT_PDATA_ACCEPT, server_len, SEED_SERVER);

    it_disconnect_active(&conn);
    CHECK_OK(rpma_peer_delete(&peer));
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    if (a.argc < 1) IT_FAIL("mode argument missing");
    size_t client_len, server_len;
    if (strcmp(a.argv[0], "none") == 0)
        client_len = server_len = 0;
    else if (strcmp(a.argv[0], "short") == 0)
        client_len = CLIENT_LEN, server_len = SERVER_LEN;
    else if (strcmp(a.argv[0], "over") == 0)
        client_len = CLIENT_MAX, server_len = SERVER_MAX;
    else
        IT_FAIL("unknown mode %s", a.argv[0]);
    if (a.server)
        server(&a, client_len, server_len);
    else
        client(&a, client_len, server_len);
    return 0;
}
