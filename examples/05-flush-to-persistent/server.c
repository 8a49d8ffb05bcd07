/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 05-flush-to-persistent/server.c -- exposes persistent memory (a file mapped with MAP_SHARED,
 * or DRAM when no file is given) and tells the client, in the private data, both the memory
 * region's descriptor and its peer configuration: whether writes may go straight to persistent
 * memory (direct_write_to_pmem), which makes PERSISTENT flushes possible
 *
 * usage: server ADDR PORT [FILE]
 */
#include <string.h>

#include "common.h"

#define SIZE 4096

/* what the server sends in private data: two descriptors, back to back */
struct server_pdata {
    uint8_t mr_desc_size;
    uint8_t pcfg_desc_size;
    char descriptors[24];
};

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
        printf("no file given: exposing DRAM, which cannot be made persistent\n");
    memset(buf, 0, SIZE);
    ex_mem_persist(&mem, 0, SIZE);

    /* only file-backed memory is offered for PERSISTENT flushes */
    bool pmem = path != NULL;
    int usage = RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY;
    if (pmem) usage |= RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;

    struct rpma_peer *peer = ex_peer_new(addr, true);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, buf, SIZE, usage, &mr));
    struct rpma_peer_cfg *pcfg = NULL;
    EX_CHECK(rpma_peer_cfg_new(&pcfg));
    EX_CHECK(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, pmem));

    struct server_pdata data = {0};
    size_t mr_size = 0, pcfg_size = 0;
    EX_CHECK(rpma_mr_get_descriptor_size(mr, &mr_size));
    EX_CHECK(rpma_peer_cfg_get_descriptor_size(pcfg, &pcfg_size));
    if (mr_size + pcfg_size > sizeof(data.descriptors)) EX_FAIL("the descriptors do not fit");
    data.mr_desc_size = (uint8_t)mr_size;
    data.pcfg_desc_size = (uint8_t)pcfg_size;
    EX_CHECK(rpma_mr_get_descriptor(mr, data.descriptors));
    EX_CHECK(rpma_peer_cfg_get_descriptor(pcfg, data.descriptors + mr_size));

    struct rpma_ep *ep = ex_listen(peer, addr, port);
    struct rpma_conn_req *req = ex_next_conn_req(ep, NULL);
    struct rpma_conn *conn = ex_accept(&req, &data, sizeof(data));
    printf("client connected; offered direct_write_to_pmem=%s, flush types:%s VISIBILITY\n",
           pmem ? "true" : "false", pmem ? " PERSISTENT," : "");

    ex_wait_closed(&conn);
    printf("client disconnected\n");
    buf[SIZE - 1] = '\0';
    printf("the memory holds \"%s\"\n", buf);
    if (buf[0] == '\0') EX_FAIL("nothing was written");

    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_peer_cfg_delete(&pcfg));
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_peer_delete(&peer));
    ex_mem_unmap(&mem);
    return 0;
}
