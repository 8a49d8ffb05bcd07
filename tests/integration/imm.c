/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * imm.c -- rpma_send_with_imm and rpma_write_with_imm, with data and with 0 bytes (NULL
 * regions, zero offsets and length): the receiver sees IBV_WC_RECV or IBV_WC_RECV_RDMA_WITH_IMM,
 * IBV_WC_WITH_IMM and the immediate value in network byte order; the data lands where it should.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <string.h>

#include "common.h"

#define SLOTS 4
#define SLOT 64
#define FILLER 0xee
#define TARGET 4096
#define MSG_LEN 40
#define WR_OFF 256
#define WR_LEN 128
#define SEED_MSG 0x1a1a
#define SEED_WR 0x2b2b

static const uint32_t imms[4] = {0x11223344, 0xa5a5, 0xcafebabe, 7};

static void server(const struct it_args *a) {
    unsigned char *rbuf = it_alloc(SLOTS * SLOT), *target = it_alloc(TARGET);
    memset(rbuf, FILLER, SLOTS * SLOT);
    struct it_region_server srv;
    it_region_server_open(&srv, a, target, TARGET, RPMA_MR_USAGE_WRITE_DST);
    struct rpma_mr_local *rmr = NULL;
    CHECK_OK(rpma_mr_reg(srv.peer, rbuf, SLOTS * SLOT, RPMA_MR_USAGE_RECV, &rmr));
    struct rpma_conn_req *req = it_next_req(srv.ep, NULL);
    struct rpma_conn *conn =
        it_accept_with_recvs(&req, rmr, SLOTS, SLOT, 0x50, srv.desc, sizeof(srv.desc));
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    /* receive completions come in message order; any posted buffer may take a message */
    bool used[SLOTS] = {false};
    int data_slot = -1;
    for (int m = 0; m < 4; m++) {
        struct ibv_wc wc;
        it_cq_get(cq, &wc);
        if (wc.status != IBV_WC_SUCCESS)
            IT_FAIL("message %d: status %s", m, it_wc_status_str(wc.status));
        CHECK(wc.wr_id >= 0x50 && wc.wr_id < 0x50 + SLOTS);
        int slot = (int)(wc.wr_id - 0x50);
        CHECK(!used[slot]);
        used[slot] = true;
        CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
        CHECK_EQ(wc.imm_data, htonl(imms[m]));
        switch (m) {
            case 0:
                CHECK_EQ(wc.opcode, IBV_WC_RECV);
                CHECK_EQ(wc.byte_len, MSG_LEN);
                CHECK_EQ(it_verify(rbuf + slot * SLOT, MSG_LEN, SEED_MSG), -1);
                data_slot = slot;
                break;
            case 1:
                CHECK_EQ(wc.opcode, IBV_WC_RECV);
                CHECK_EQ(wc.byte_len, 0);
                break;
            case 2:
                CHECK_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
                /* the written data is in place when the receive completes */
                CHECK_EQ(it_verify(target + WR_OFF, WR_LEN, SEED_WR), -1);
                break;
            case 3:
                CHECK_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
                break;
        }
    }
    it_cq_expect_empty(cq);
    it_disconnect_passive(&conn, false);

    /* nothing else was touched: the unused parts of receive buffers and of the target */
    for (int s = 0; s < SLOTS; s++)
        for (int i = (s == data_slot ? MSG_LEN : 0); i < SLOT; i++)
            if (rbuf[s * SLOT + i] != FILLER) IT_FAIL("receive buffer %d byte %d changed", s, i);
    for (size_t i = 0; i < TARGET; i++)
        if ((i < WR_OFF || i >= WR_OFF + WR_LEN) && target[i] != 0)
            IT_FAIL("target byte %zu changed", i);

    CHECK_OK(rpma_mr_dereg(&rmr));
    it_region_server_close(&srv);
    free(rbuf);
    free(target);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *src = it_alloc(MSG_LEN + WR_LEN);
    it_fill(src, MSG_LEN, SEED_MSG);
    it_fill(src + MSG_LEN, WR_LEN, SEED_WR);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, src, MSG_LEN + WR_LEN, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_WRITE_SRC,
                         &mr));
    struct rpma_mr_remote *dst = NULL;
    struct rpma_cq *cq = NULL;
    struct rpma_conn *conn = it_connect_region(peer, a, NULL, NULL, 0, &dst, &cq);

    CHECK_OK(
        rpma_send_with_imm(conn, mr, 0, MSG_LEN, RPMA_F_COMPLETION_ALWAYS, imms[0], (void *)0x61));
    CHECK_OK(rpma_send_with_imm(conn, NULL, 0, 0, RPMA_F_COMPLETION_ALWAYS, imms[1], (void *)0x62));
    CHECK_OK(rpma_write_with_imm(conn, dst, WR_OFF, mr, MSG_LEN, WR_LEN, RPMA_F_COMPLETION_ALWAYS,
                                 imms[2], (void *)0x63));
    CHECK_OK(rpma_write_with_imm(conn, NULL, 0, NULL, 0, 0, RPMA_F_COMPLETION_ALWAYS, imms[3],
                                 (void *)0x64));
    it_cq_expect(cq, IBV_WC_SEND, (void *)0x61);
    it_cq_expect(cq, IBV_WC_SEND, (void *)0x62);
    it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)0x63);
    it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)0x64);
    it_cq_expect_empty(cq);

    it_disconnect_region(&conn, &dst);
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(src);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
