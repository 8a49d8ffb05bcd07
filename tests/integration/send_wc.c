/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * send_wc.c -- the initiator's completions carry what a NIC (rxe) puts there: byte_len is the
 * length the request moved (a write, a send, a read; 0 for an empty one), 8 for an atomic write
 * and 8 for a flush (upstream librpma flushes with an 8-byte read), and wc_flags has
 * IBV_WC_WITH_IMM for rpma_send_with_imm and rpma_write_with_imm only.
 */
#define _GNU_SOURCE
#include <string.h>

#include "common.h"

#define TARGET 8192
#define SRC 4096
#define SLOT 256
#define SLOTS 3

enum wc_kind { W_WRITE, W_WRITE_EMPTY, W_WRITE_IMM, W_SEND, W_SEND_IMM, W_READ, W_ATOMIC, W_FLUSH };

struct expect {
    const char *what;
    enum ibv_wc_opcode opcode;
    uint32_t byte_len;
    bool imm;
};

static const struct expect EXPECTED[] = {
    [W_WRITE] = {"rpma_write", IBV_WC_RDMA_WRITE, 1000, false},
    [W_WRITE_EMPTY] = {"rpma_write (0 bytes)", IBV_WC_RDMA_WRITE, 0, false},
    [W_WRITE_IMM] = {"rpma_write_with_imm", IBV_WC_RDMA_WRITE, 300, true},
    [W_SEND] = {"rpma_send", IBV_WC_SEND, 40, false},
    [W_SEND_IMM] = {"rpma_send_with_imm", IBV_WC_SEND, 24, true},
    [W_READ] = {"rpma_read", IBV_WC_RDMA_READ, 700, false},
    [W_ATOMIC] = {"rpma_atomic_write", IBV_WC_RDMA_WRITE, 8, false},
    [W_FLUSH] = {"rpma_flush", IBV_WC_RDMA_READ, 8, false},
};
#define N_OPS (sizeof(EXPECTED) / sizeof(EXPECTED[0]))

static void server(const struct it_args *a) {
    char *target = it_alloc(TARGET), *rbuf = it_alloc(SLOTS * SLOT);
    struct it_region_server srv;
    it_region_server_open(
        &srv, a, target, TARGET,
        RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
    struct rpma_mr_local *rmr = NULL;
    CHECK_OK(rpma_mr_reg(srv.peer, rbuf, SLOTS * SLOT, RPMA_MR_USAGE_RECV, &rmr));
    struct rpma_conn_req *req = it_next_req(srv.ep, NULL);
    struct rpma_conn *conn =
        it_accept_with_recvs(&req, rmr, SLOTS, SLOT, 0x50, srv.desc, sizeof(srv.desc));
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    /* a write with immediate and two sends consume the three receives */
    for (int m = 0; m < SLOTS; m++) {
        struct ibv_wc wc;
        it_cq_get(cq, &wc);
        if (wc.status != IBV_WC_SUCCESS)
            IT_FAIL("receive %d: status %s", m, it_wc_status_str(wc.status));
    }
    it_disconnect_passive(&conn, false);
    CHECK_OK(rpma_mr_dereg(&rmr));
    it_region_server_close(&srv);
    free(target);
    free(rbuf);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *src = it_alloc(SRC), *dst = it_alloc(SRC);
    it_fill(src, SRC, 0x5e4d);
    struct rpma_mr_local *smr = NULL, *dmr = NULL;
    CHECK_OK(rpma_mr_reg(peer, src, SRC, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_SEND, &smr));
    CHECK_OK(rpma_mr_reg(peer, dst, SRC, RPMA_MR_USAGE_READ_DST, &dmr));
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, N_OPS));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, N_OPS));
    struct rpma_mr_remote *rmr = NULL;
    struct rpma_cq *cq = NULL;
    struct rpma_conn *conn = it_connect_region(peer, a, cfg, NULL, 0, &rmr, &cq);

    const int f = RPMA_F_COMPLETION_ALWAYS;
    const char value[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (uintptr_t k = 0; k < N_OPS; k++) {
        uint32_t len = EXPECTED[k].byte_len;
        void *ctx = (void *)(0x100 + k);
        switch ((enum wc_kind)k) {
            case W_WRITE:
                CHECK_OK(rpma_write(conn, rmr, 0, smr, 0, len, f, ctx));
                break;
            case W_WRITE_EMPTY:
                CHECK_OK(rpma_write(conn, NULL, 0, NULL, 0, 0, f, ctx));
                break;
            case W_WRITE_IMM:
                CHECK_OK(rpma_write_with_imm(conn, rmr, 2048, smr, 0, len, f, 0xabcd, ctx));
                break;
            case W_SEND:
                CHECK_OK(rpma_send(conn, smr, 0, len, f, ctx));
                break;
            case W_SEND_IMM:
                CHECK_OK(rpma_send_with_imm(conn, smr, 0, len, f, 0x1234, ctx));
                break;
            case W_READ:
                CHECK_OK(rpma_read(conn, dmr, 0, rmr, 0, len, f, ctx));
                break;
            case W_ATOMIC:
                CHECK_OK(rpma_atomic_write(conn, rmr, 4096, value, f, ctx));
                break;
            case W_FLUSH:
                CHECK_OK(rpma_flush(conn, rmr, 0, TARGET, RPMA_FLUSH_TYPE_VISIBILITY, f, ctx));
                break;
        }
    }
    int failed = 0;
    for (uintptr_t k = 0; k < N_OPS; k++) {
        const struct expect *e = &EXPECTED[k];
        struct ibv_wc wc;
        it_cq_get(cq, &wc);
        CHECK_EQ(wc.wr_id, 0x100 + k);
        if (wc.status != IBV_WC_SUCCESS)
            IT_FAIL("%s: status %s", e->what, it_wc_status_str(wc.status));
        bool imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
        printf("%-22s opcode %d byte_len %u wc_flags 0x%x\n", e->what, (int)wc.opcode, wc.byte_len,
               (unsigned)wc.wc_flags);
        if (wc.opcode != e->opcode || wc.byte_len != e->byte_len || imm != e->imm) {
            printf("FAIL %s: expected opcode %d byte_len %u%s\n", e->what, (int)e->opcode,
                   e->byte_len, e->imm ? " and IBV_WC_WITH_IMM" : " and no IBV_WC_WITH_IMM");
            failed++;
        }
    }
    it_cq_expect_empty(cq);
    CHECK_EQ(memcmp(dst, src, EXPECTED[W_READ].byte_len), 0);
    if (failed) IT_FAIL("%d completion(s) differ from a NIC's", failed);

    it_disconnect_region(&conn, &rmr);
    CHECK_OK(rpma_conn_cfg_delete(&cfg));
    CHECK_OK(rpma_mr_dereg(&smr));
    CHECK_OK(rpma_mr_dereg(&dmr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(src);
    free(dst);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
