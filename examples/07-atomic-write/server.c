/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 07-atomic-write/server.c -- exposes a log for a client to append to: at offset 0 an 8-byte
 * counter of the bytes used, the entries after it. When the client is gone it prints the log.
 *
 * usage: server ADDR PORT
 */
#include <string.h>

#include "common.h"

#define SIZE 4096
#define HEADER 8 /* the used-length counter */

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];

    struct rpma_peer *peer = ex_peer_new(addr, true);
    char *log = ex_malloc(SIZE);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(
        peer, log, SIZE,
        RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
        &mr));
    size_t desc_size = 0;
    EX_CHECK(rpma_mr_get_descriptor_size(mr, &desc_size));
    char desc[64];
    EX_ASSERT(desc_size <= sizeof(desc));
    EX_CHECK(rpma_mr_get_descriptor(mr, desc));

    struct rpma_ep *ep = ex_listen(peer, addr, port);
    struct rpma_conn_req *req = ex_next_conn_req(ep, NULL);
    struct rpma_conn *conn = ex_accept(&req, desc, desc_size);
    printf("client connected; the log is empty\n");
    ex_wait_closed(&conn);
    printf("client disconnected\n");

    /* the counter was stored with one aligned 8-byte write: read it the same way */
    uint64_t used = __atomic_load_n((uint64_t *)log, __ATOMIC_ACQUIRE);
    if (used == 0 || used > SIZE - HEADER)
        EX_FAIL("the log's used length is %llu", (unsigned long long)used);
    printf("the log holds %llu bytes: \"%.*s\"\n", (unsigned long long)used, (int)used,
           log + HEADER);

    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(log);
    return 0;
}
