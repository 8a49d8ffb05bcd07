/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * remote_access.c -- what a remote region's usage lets a peer do, as a NIC grants it from the
 * access flags upstream librpma registers with, and what a refused write-with-immediate does to
 * the receive it took. Two connections:
 *   1. reads from three regions that have no READ_SRC usage but a flush usage
 *      (FLUSH_TYPE_VISIBILITY; FLUSH_TYPE_PERSISTENT; WRITE_DST | FLUSH_TYPE_PERSISTENT, the usual
 *      persistent target): a flush is carried out as a read, so either flush usage gives remote
 *      reads. Each read returns the region's bytes; a write into the third is read back.
 *   2. a write-with-immediate whose rkey is tampered with: the initiator gets
 *      IBV_WC_REM_ACCESS_ERR, and the receive it took at the target completes with
 *      IBV_WC_REM_ACCESS_ERR too (with its wr_id), as rxe completes it; the target's memory is
 *      unchanged.
 */
#define _GNU_SOURCE
#include <string.h>

#include "common.h"

#define PAGE 4096
#define LEN 64
#define REGIONS 3
#define RKEY_OFF 16 /* address u64, length u64, rkey u32, usage u8 */
#define WR_RECV 0x51
#define WR_IMM 0x52

static const int usages[REGIONS] = {
    RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
    RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT,
    RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT,
};
static const uint64_t seeds[REGIONS] = {0xa110, 0xa111, 0xa112};
#define SEED_NEW 0xa113

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *mem[REGIONS];
    struct rpma_mr_local *mr[REGIONS];
    char pdata[REGIONS * IT_MR_DESC_SIZE];
    for (int i = 0; i < REGIONS; i++) {
        mem[i] = it_alloc(PAGE);
        it_fill(mem[i], PAGE, seeds[i]);
        CHECK_OK(rpma_mr_reg(peer, mem[i], PAGE, usages[i], &mr[i]));
        CHECK_OK(rpma_mr_get_descriptor(mr[i], pdata + i * IT_MR_DESC_SIZE));
    }
    char *rbuf = it_alloc(PAGE);
    struct rpma_mr_local *rmr = NULL;
    CHECK_OK(rpma_mr_reg(peer, rbuf, PAGE, RPMA_MR_USAGE_RECV, &rmr));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();

    /* 1: the client reads and writes; it ends the connection when done */
    struct rpma_conn_req *req = it_next_req(ep, NULL);
    struct rpma_conn *conn = it_accept(&req, pdata, sizeof(pdata));
    it_disconnect_passive(&conn, false);
    CHECK_EQ(it_verify(mem[2], LEN, SEED_NEW), -1);

    /* 2: two receives; the tampered write-with-immediate takes the first */
    req = it_next_req(ep, NULL);
    CHECK_OK(rpma_conn_req_recv(req, rmr, 0, 8, (void *)WR_RECV));
    conn = it_accept(&req, pdata, sizeof(pdata));
    CHECK_OK(rpma_recv(conn, rmr, 8, 8, (void *)(WR_RECV + 1)));
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    it_cq_expect_status(cq, WR_RECV, IBV_WC_REM_ACCESS_ERR,
                        "the receive a refused write-with-immediate took");
    it_disconnect_active(&conn);
    for (int i = 0; i < REGIONS; i++) {
        if (i == 2) continue;
        long bad = it_verify(mem[i], PAGE, seeds[i]);
        if (bad >= 0) IT_FAIL("region %d changed at byte %ld", i, bad);
    }
    printf(
        "server: reads granted by flush usages; the refused write-with-immediate's receive "
        "failed with it\n");

    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&rmr));
    for (int i = 0; i < REGIONS; i++) {
        CHECK_OK(rpma_mr_dereg(&mr[i]));
        free(mem[i]);
    }
    CHECK_OK(rpma_peer_delete(&peer));
    free(rbuf);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *buf = it_alloc(PAGE);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, PAGE, RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC, &mr));

    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    struct rpma_mr_remote *remote[REGIONS];
    for (int i = 0; i < REGIONS; i++) {
        remote[i] = it_remote_mr(conn, (size_t)i * IT_MR_DESC_SIZE);
        memset(buf, 0, PAGE);
        CHECK_OK(rpma_read(conn, mr, 0, remote[i], 0, LEN, RPMA_F_COMPLETION_ALWAYS,
                           (void *)(uintptr_t)(0xd0 + i)));
        it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)(uintptr_t)(0xd0 + i));
        long bad = it_verify(buf, LEN, seeds[i]);
        if (bad >= 0)
            IT_FAIL("read from region %d (usage %#x): byte %ld differs", i, usages[i], bad);
    }
    it_fill(buf, LEN, SEED_NEW);
    CHECK_OK(rpma_write(conn, remote[2], 0, mr, 0, LEN, RPMA_F_COMPLETION_ALWAYS, (void *)0xe0));
    it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)0xe0);
    memset(buf, 0, PAGE);
    CHECK_OK(rpma_read(conn, mr, 0, remote[2], 0, LEN, RPMA_F_COMPLETION_ALWAYS, (void *)0xe1));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0xe1);
    CHECK_EQ(it_verify(buf, LEN, SEED_NEW), -1);
    for (int i = 0; i < REGIONS; i++) CHECK_OK(rpma_mr_remote_delete(&remote[i]));
    it_disconnect_active(&conn);

    conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    struct rpma_conn_private_data pd = {0};
    CHECK_OK(rpma_conn_get_private_data(conn, &pd));
    unsigned char desc[IT_MR_DESC_SIZE];
    memcpy(desc, (const char *)pd.ptr + 2 * IT_MR_DESC_SIZE, sizeof(desc));
    for (int i = 0; i < 4; i++) desc[RKEY_OFF + i] ^= (unsigned char)(0x5a + i);
    struct rpma_mr_remote *bad = NULL;
    CHECK_OK(rpma_mr_remote_from_descriptor(desc, sizeof(desc), &bad));
    CHECK_OK(rpma_write_with_imm(conn, bad, 0, mr, 0, LEN, RPMA_F_COMPLETION_ALWAYS, 0x1234,
                                 (void *)WR_IMM));
    it_cq_expect_status(cq, WR_IMM, IBV_WC_REM_ACCESS_ERR, "the tampered write-with-immediate");
    CHECK_OK(rpma_mr_remote_delete(&bad));
    /* the server ends this one once it has seen its receive fail */
    it_disconnect_passive(&conn, true);

    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
