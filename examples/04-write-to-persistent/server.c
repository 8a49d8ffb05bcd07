/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 04-write-to-persistent/server.c -- exposes persistent memory (a file mapped with MAP_SHARED,
 * or DRAM when no file is given) for remote writes; after the client is gone it makes the
 * received text durable and prints it
 *
 * usage: server ADDR PORT [FILE]
 */
#include <string.h>

#include "common.h"

#define SIZE 4096

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT [FILE]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    const char *path = argc > 3 ? argv[3] : NULL;

    struct ex_mem mem;
    ex_mem_map(path, SIZE, &mem);
    char *buf = mem.ptr;
    if (path)
        ex_mem_print_earlier(&mem, path);
    else
        printf("no file given: exposing DRAM\n");
    /* start empty, so that what is printed at the end is surely this client's */
    memset(buf, 0, SIZE);
    ex_mem_persist(&mem, 0, SIZE);

    struct rpma_peer *peer = ex_peer_new(addr, true);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, buf, SIZE,
                         RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, &mr));
    size_t desc_size = 0;
    EX_CHECK(rpma_mr_get_descriptor_size(mr, &desc_size));
    char desc[64];
    EX_ASSERT(desc_size <= sizeof(desc));
    EX_CHECK(rpma_mr_get_descriptor(mr, desc));

    struct rpma_ep *ep = ex_listen(peer, addr, port);
    struct rpma_conn_req *req = ex_next_conn_req(ep, NULL);
    struct rpma_conn *conn = ex_accept(&req, desc, desc_size);
    printf("client connected\n");

    /* the writes need nothing from this side: wait until the client is done */
    ex_wait_closed(&conn);
    printf("client disconnected\n");

    buf[SIZE - 1] = '\0';
    ex_mem_persist(&mem, 0, strlen(buf) + 1);
    printf("the client wrote \"%s\"%s\n", buf, path ? " (now durable in the file)" : "");
    if (buf[0] == '\0') EX_FAIL("nothing was written");

    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_peer_delete(&peer));
    ex_mem_unmap(&mem);
    return 0;
}
