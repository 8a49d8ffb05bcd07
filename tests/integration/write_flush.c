/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * write_flush.c -- rpma_write followed by rpma_flush (VISIBILITY and PERSISTENT), data read back
 * by the client and checked again by the server; PERSISTENT is refused (RPMA_E_NOSUPP) before
 * the server's peer cfg is applied and on a region without the PERSISTENT flush usage; a flush of
 * any length (2 GiB, SIZE_MAX) is taken.
 */
#define _GNU_SOURCE
#include <string.h>

#include "common.h"

#define SIZE_A (64 * 1024)
#define SIZE_B 4096
#define CHUNK 4096
#define SMALL 512
#define S1 0xf1a1
#define S2 0xf1a2
#define S3 0xf1a3
/* private data: MR A descriptor, peer cfg descriptor, MR B descriptor */
#define OFF_A 0
#define OFF_PCFG IT_MR_DESC_SIZE
#define OFF_B (IT_MR_DESC_SIZE + IT_PCFG_DESC_SIZE)
#define PDATA_LEN (2 * IT_MR_DESC_SIZE + IT_PCFG_DESC_SIZE)

static bool all_zero(const char *p, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (p[i]) return false;
    return true;
}

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *buf_a = it_alloc(SIZE_A), *buf_b = it_alloc(SIZE_B);
    struct rpma_mr_local *mr_a = NULL, *mr_b = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf_a, SIZE_A,
                         RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC |
                             RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
                             RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT,
                         &mr_a));
    CHECK_OK(rpma_mr_reg(
        peer, buf_b, SIZE_B,
        RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
        &mr_b));
    struct rpma_peer_cfg *pcfg = NULL;
    CHECK_OK(rpma_peer_cfg_new(&pcfg));
    CHECK_OK(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true));

    char pdata[PDATA_LEN];
    size_t dsize = 0;
    CHECK_OK(rpma_mr_get_descriptor_size(mr_a, &dsize));
    CHECK_EQ(dsize, IT_MR_DESC_SIZE);
    CHECK_OK(rpma_peer_cfg_get_descriptor_size(pcfg, &dsize));
    CHECK_EQ(dsize, IT_PCFG_DESC_SIZE);
    CHECK_OK(rpma_mr_get_descriptor(mr_a, pdata + OFF_A));
    CHECK_OK(rpma_peer_cfg_get_descriptor(pcfg, pdata + OFF_PCFG));
    CHECK_OK(rpma_mr_get_descriptor(mr_b, pdata + OFF_B));

    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn_req *req = it_next_req(ep, NULL);
    struct rpma_conn *conn = it_accept(&req, pdata, sizeof(pdata));
    it_disconnect_passive(&conn, false);

    /* what the client wrote, and nothing else */
    CHECK_EQ(it_verify(buf_a, CHUNK, S1), -1);
    CHECK_EQ(it_verify(buf_a + CHUNK, CHUNK, S2), -1);
    CHECK(all_zero(buf_a + 2 * CHUNK, SIZE_A - 2 * CHUNK));
    CHECK_EQ(it_verify(buf_b, SMALL, S3), -1);
    CHECK(all_zero(buf_b + SMALL, SIZE_B - SMALL));

    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_peer_cfg_delete(&pcfg));
    CHECK_OK(rpma_mr_dereg(&mr_a));
    CHECK_OK(rpma_mr_dereg(&mr_b));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf_a);
    free(buf_b);
}

static void read_back(struct rpma_conn *conn, struct rpma_cq *cq, struct rpma_mr_local *dst_mr,
                      char *dst, struct rpma_mr_remote *src, size_t off, const char *expect,
                      size_t len) {
    memset(dst, 0, len);
    CHECK_OK(rpma_read(conn, dst_mr, 0, src, off, len, RPMA_F_COMPLETION_ALWAYS, (void *)0x4ead));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x4ead);
    CHECK(memcmp(dst, expect, len) == 0);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *src = it_alloc(3 * CHUNK), *dst = it_alloc(CHUNK);
    it_fill(src, CHUNK, S1);
    it_fill(src + CHUNK, CHUNK, S2);
    it_fill(src + 2 * CHUNK, SMALL, S3);
    struct rpma_mr_local *src_mr = NULL, *dst_mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, src, 3 * CHUNK, RPMA_MR_USAGE_WRITE_SRC, &src_mr));
    CHECK_OK(rpma_mr_reg(peer, dst, CHUNK, RPMA_MR_USAGE_READ_DST, &dst_mr));

    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    struct rpma_mr_remote *ra = it_remote_mr(conn, OFF_A), *rb = it_remote_mr(conn, OFF_B);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    int ft = 0;
    CHECK_OK(rpma_mr_remote_get_flush_type(ra, &ft));
    CHECK_EQ(ft, RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
    CHECK_OK(rpma_mr_remote_get_flush_type(rb, &ft));
    CHECK_EQ(ft, RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);

    /* no remote peer cfg applied yet: direct_write_to_pmem is false */
    CHECK_ERR(rpma_flush(conn, ra, 0, CHUNK, RPMA_FLUSH_TYPE_PERSISTENT, RPMA_F_COMPLETION_ALWAYS,
                         (void *)0x9),
              RPMA_E_NOSUPP);

    /* write (completion only on error) + VISIBILITY flush */
    CHECK_OK(rpma_write(conn, ra, 0, src_mr, 0, CHUNK, RPMA_F_COMPLETION_ON_ERROR, (void *)0x11));
    CHECK_OK(rpma_flush(conn, ra, 0, CHUNK, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS,
                        (void *)0x12));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x12);
    it_cq_expect_empty(cq);
    read_back(conn, cq, dst_mr, dst, ra, 0, src, CHUNK);

    /* with the server's peer cfg applied, PERSISTENT is allowed on region A */
    it_apply_remote_pcfg(conn, OFF_PCFG);
    CHECK_OK(
        rpma_write(conn, ra, CHUNK, src_mr, CHUNK, CHUNK, RPMA_F_COMPLETION_ALWAYS, (void *)0x21));
    CHECK_OK(rpma_flush(conn, ra, CHUNK, CHUNK, RPMA_FLUSH_TYPE_PERSISTENT,
                        RPMA_F_COMPLETION_ALWAYS, (void *)0x22));
    it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)0x21);
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x22);
    read_back(conn, cq, dst_mr, dst, ra, CHUNK, src + CHUNK, CHUNK);

    /* a flush moves no data: no length is too long (2 GiB, SIZE_MAX), the rest of the region is
     * covered, and the connection goes on */
    CHECK_OK(rpma_flush(conn, ra, CHUNK, (size_t)2 << 30, RPMA_FLUSH_TYPE_PERSISTENT,
                        RPMA_F_COMPLETION_ALWAYS, (void *)0x23));
    CHECK_OK(rpma_flush(conn, ra, 0, SIZE_MAX, RPMA_FLUSH_TYPE_PERSISTENT, RPMA_F_COMPLETION_ALWAYS,
                        (void *)0x24));
    CHECK_OK(rpma_flush(conn, ra, 0, SIZE_MAX, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS,
                        (void *)0x25));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x23);
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x24);
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x25);
    read_back(conn, cq, dst_mr, dst, ra, CHUNK, src + CHUNK, CHUNK);

    /* region B lacks the PERSISTENT flush usage; VISIBILITY works */
    CHECK_ERR(rpma_flush(conn, rb, 0, SMALL, RPMA_FLUSH_TYPE_PERSISTENT, RPMA_F_COMPLETION_ALWAYS,
                         (void *)0x31),
              RPMA_E_NOSUPP);
    CHECK_OK(rpma_write(conn, rb, 0, src_mr, 2 * CHUNK, SMALL, RPMA_F_COMPLETION_ON_ERROR,
                        (void *)0x32));
    CHECK_OK(rpma_flush(conn, rb, 0, SMALL, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS,
                        (void *)0x33));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x33);
    read_back(conn, cq, dst_mr, dst, rb, 0, src + 2 * CHUNK, SMALL);
    it_cq_expect_empty(cq);

    CHECK_OK(rpma_mr_remote_delete(&ra));
    CHECK_OK(rpma_mr_remote_delete(&rb));
    it_disconnect_active(&conn);
    CHECK_OK(rpma_mr_dereg(&src_mr));
    CHECK_OK(rpma_mr_dereg(&dst_mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(src);
    free(dst);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
