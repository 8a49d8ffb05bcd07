/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * link_loss.c -- the RDMA device goes away under an established connection (link_loss.sh
 * deletes the rxe link once the client prints CONNECTED). Each side must see the connection
 * LOST (rdma_cm's DEVICE_REMOVAL), every call after that must return instead of hanging, and
 * deleting everything must let the device go (the kernel's removal waits for that). Runs only
 * where the link can be deleted (the guest); the reference passes it too.
 *
 * Both ends sit on the one rxe device, and the kernel tells its ids of the removal one after
 * another, the client's first (it was bound first). On DEVICE_REMOVAL the kernel itself
 * destroys the client's id (ucma), and a connected id that goes sends a disconnect request: if
 * that reaches the server's id before the removal does, the server sees DISCONNECTED (CLOSED).
 * So the client must see LOST and the server LOST or CLOSED, on the reference as on rpma.
 */
#define _GNU_SOURCE
#include <string.h>

#include "common.h"

#define LEN 4096

/* LOST (or CLOSED where closed_ok), after which a posted write is refused or flushed with an
 * error; then everything goes */
static void after_loss(struct rpma_peer **peer, struct rpma_conn **conn, struct rpma_mr_local **mr,
                       char *buf, struct rpma_mr_remote *remote, const char *who, bool closed_ok) {
    enum rpma_conn_event ev = it_next_event(*conn);
    printf("%s: event %s\n", who, rpma_utils_conn_event_2str(ev));
    CHECK(ev == RPMA_CONN_LOST || (closed_ok && ev == RPMA_CONN_CLOSED));
    if (remote) {
        /* the post must return; what becomes of it is the device's (the reference's never
         * completes, ours may), so no completion is awaited */
        int ret = rpma_write(*conn, remote, 0, *mr, 0, LEN, RPMA_F_COMPLETION_ALWAYS, NULL);
        printf("%s: a write after the loss -> %d\n", who, ret);
        CHECK_OK(rpma_mr_remote_delete(&remote));
    }
    (void)rpma_conn_disconnect(*conn); /* may fail: the device is gone */
    int ret = rpma_conn_delete(conn);
    printf("%s: rpma_conn_delete -> %d\n", who, ret);
    ret = rpma_mr_dereg(mr);
    printf("%s: rpma_mr_dereg -> %d\n", who, ret);
    if (*mr == NULL) free(buf); /* a region still registered keeps its memory */
    ret = rpma_peer_delete(peer);
    printf("%s: rpma_peer_delete -> %d\n", who, ret);
}

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *buf = it_alloc(LEN);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, LEN, RPMA_MR_USAGE_WRITE_DST, &mr));
    char desc[IT_MR_DESC_SIZE];
    CHECK_OK(rpma_mr_get_descriptor(mr, desc));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn_req *req = it_next_req(ep, NULL);
    struct rpma_conn *conn = it_accept(&req, desc, sizeof(desc));
    int ret = rpma_ep_shutdown(&ep);
    printf("server: rpma_ep_shutdown -> %d\n", ret);
    after_loss(&peer, &conn, &mr, buf, NULL, "server", true);
    printf("server: done\n");
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *buf = it_alloc(LEN);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, LEN, RPMA_MR_USAGE_WRITE_SRC, &mr));
    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    struct rpma_mr_remote *remote = it_remote_mr(conn, 0);
    printf("CONNECTED\n");
    fflush(stdout);
    after_loss(&peer, &conn, &mr, buf, remote, "client", false);
    printf("client: done\n");
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
