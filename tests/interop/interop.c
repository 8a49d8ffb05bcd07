/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * interop.c -- one connection whose two ends may be different librpma builds: rpma over verbs
 * and Debian's librpma (run_interop.sh picks which side loads which). The client checks what the
 * wire carries between independent implementations: private data both ways (with a memory
 * descriptor in the server's), write + flush, atomic write, read, send and receive with and
 * without immediate data, write with immediate data, and a clean disconnect on both sides.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <string.h>

#include "common.h"

#define REGION 8192
#define W_OFF 0 /* the client writes here */
#define W_LEN 1024
#define AW_OFF 1024 /* the atomic write */
#define R_OFF 2048  /* the server fills this for the client's read */
#define R_LEN 1024
#define WI_OFF 3072 /* write with immediate data */
#define WI_LEN 64
#define MSG 64
#define SEED_W 0x1111
#define SEED_R 0x2222
#define SEED_WI 0x3333
#define SEED_MSG 0x4444
#define AW_VALUE 0x0123456789abcdefULL
#define IMM_REPLY 0xfeed1234u
#define IMM_WRITE 0xabcd0042u

static const char client_pdata[] = "rpma-interop: hello from the client";

/* the server's message buffer is two slots: the client's plain send, then its write's imm */
static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    unsigned char *region = it_alloc(REGION), *msgs = it_alloc(2 * MSG);
    it_fill(region + R_OFF, R_LEN, SEED_R);
    struct rpma_mr_local *mr = NULL, *mmr = NULL;
    CHECK_OK(rpma_mr_reg(
        peer, region, REGION,
        RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
        &mr));
    CHECK_OK(rpma_mr_reg(peer, msgs, 2 * MSG, RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_SEND, &mmr));
    char desc[IT_MR_DESC_SIZE];
    CHECK_OK(rpma_mr_get_descriptor(mr, desc));

    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn_req *req = it_next_req(ep, NULL);
    struct rpma_conn_private_data pd;
    CHECK_OK(rpma_conn_req_get_private_data(req, &pd));
    CHECK_EQ(pd.len, IT_PDATA_CONNECT);
    CHECK(memcmp(pd.ptr, client_pdata, sizeof(client_pdata)) == 0);
    CHECK_OK(rpma_conn_req_recv(req, mmr, 0, MSG, (void *)0x51));
    struct rpma_conn *conn = it_accept(&req, desc, sizeof(desc));
    CHECK_OK(rpma_recv(conn, mmr, MSG, MSG, (void *)0x52));
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    /* the plain send comes after the write, its flush and the atomic write: all in place */
    struct ibv_wc wc;
    it_cq_get(cq, &wc);
    CHECK_EQ(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ(wc.opcode, IBV_WC_RECV);
    CHECK_EQ(wc.wr_id, 0x51);
    CHECK_EQ(wc.byte_len, MSG);
    CHECK(!(wc.wc_flags & IBV_WC_WITH_IMM));
    CHECK_EQ(it_verify(msgs, MSG, SEED_MSG), -1);
    CHECK_EQ(it_verify(region + W_OFF, W_LEN, SEED_W), -1);
    uint64_t aw;
    memcpy(&aw, region + AW_OFF, sizeof(aw));
    CHECK_EQ(aw, AW_VALUE);

    /* the reply: the same bytes back, with immediate data */
    CHECK_OK(
        rpma_send_with_imm(conn, mmr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, IMM_REPLY, (void *)0x61));
    it_cq_expect(cq, IBV_WC_SEND, (void *)0x61);

    /* then the client's write with immediate data */
    it_cq_get(cq, &wc);
    CHECK_EQ(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    CHECK_EQ(wc.wr_id, 0x52);
    CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
    CHECK_EQ(wc.imm_data, htonl(IMM_WRITE));
    CHECK_EQ(it_verify(region + WI_OFF, WI_LEN, SEED_WI), -1);

    it_disconnect_passive(&conn, false);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mmr));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(region);
    free(msgs);
    printf("server: every check passed\n");
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    unsigned char *buf = it_alloc(REGION), *msgs = it_alloc(2 * MSG);
    it_fill(buf + W_OFF, W_LEN, SEED_W);
    it_fill(buf + WI_OFF, WI_LEN, SEED_WI);
    it_fill(msgs, MSG, SEED_MSG);
    struct rpma_mr_local *mr = NULL, *mmr = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, REGION, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &mr));
    CHECK_OK(rpma_mr_reg(peer, msgs, 2 * MSG, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &mmr));
    struct rpma_conn *conn =
        it_connect(peer, a->addr, a->port, NULL, client_pdata, sizeof(client_pdata));
    struct rpma_conn_private_data pd;
    CHECK_OK(rpma_conn_get_private_data(conn, &pd));
    CHECK_EQ(pd.len, IT_PDATA_ACCEPT);
    struct rpma_mr_remote *remote = it_remote_mr(conn, 0);
    size_t rsize = 0;
    CHECK_OK(rpma_mr_remote_get_size(remote, &rsize));
    CHECK_EQ(rsize, REGION);
    int flush_type = 0;
    CHECK_OK(rpma_mr_remote_get_flush_type(remote, &flush_type));
    CHECK_EQ(flush_type, RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    CHECK_OK(rpma_recv(conn, mmr, MSG, MSG, (void *)0x71));

    CHECK_OK(rpma_write(conn, remote, W_OFF, mr, W_OFF, W_LEN, RPMA_F_COMPLETION_ON_ERROR, NULL));
    CHECK_OK(rpma_flush(conn, remote, W_OFF, W_LEN, RPMA_FLUSH_TYPE_VISIBILITY,
                        RPMA_F_COMPLETION_ALWAYS, (void *)0x81));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x81); /* a flush completes as the read it is */
    const uint64_t value = AW_VALUE;
    char src[8];
    memcpy(src, &value, sizeof(src));
    CHECK_OK(rpma_atomic_write(conn, remote, AW_OFF, src, RPMA_F_COMPLETION_ALWAYS, (void *)0x82));
    it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)0x82);
    CHECK_OK(rpma_flush(conn, remote, AW_OFF, 8, RPMA_FLUSH_TYPE_VISIBILITY,
                        RPMA_F_COMPLETION_ALWAYS, (void *)0x83));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x83);
    CHECK_OK(rpma_send(conn, mmr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, (void *)0x84));

    /* the send's completion and the reply, in either order */
    bool sent = false, replied = false;
    while (!sent || !replied) {
        struct ibv_wc wc;
        it_cq_get(cq, &wc);
        CHECK_EQ(wc.status, IBV_WC_SUCCESS);
        if (wc.opcode == IBV_WC_SEND) {
            CHECK_EQ(wc.wr_id, 0x84);
            sent = true;
            continue;
        }
        CHECK_EQ(wc.opcode, IBV_WC_RECV);
        CHECK_EQ(wc.wr_id, 0x71);
        CHECK_EQ(wc.byte_len, MSG);
        CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
        CHECK_EQ(wc.imm_data, htonl(IMM_REPLY));
        CHECK_EQ(it_verify(msgs + MSG, MSG, SEED_MSG), -1);
        replied = true;
    }

    CHECK_OK(
        rpma_read(conn, mr, R_OFF, remote, R_OFF, R_LEN, RPMA_F_COMPLETION_ALWAYS, (void *)0x85));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)0x85);
    CHECK_EQ(it_verify(buf + R_OFF, R_LEN, SEED_R), -1);

    CHECK_OK(rpma_write_with_imm(conn, remote, WI_OFF, mr, WI_OFF, WI_LEN, RPMA_F_COMPLETION_ALWAYS,
                                 IMM_WRITE, (void *)0x86));
    it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)0x86);

    CHECK_OK(rpma_mr_remote_delete(&remote));
    it_disconnect_active(&conn);
    CHECK_OK(rpma_mr_dereg(&mmr));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
    free(msgs);
    printf("client: every check passed\n");
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
