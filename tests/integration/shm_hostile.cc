// SPDX-License-Identifier: BSD-3-Clause
//
// shm_hostile.cc -- a client that corrupts the shared rings of one of its shm connections
// (issue 11: nothing in a shared ring is trusted; a corrupt ring ends that connection, LOST,
// never the process). The client connects twice through the library (A and B), finds A's
// segment among its own mappings (/proc/self/maps: the memfd rpma-shm), scribbles over A's ring
// control blocks and makes the server use A. The server must report RPMA_CONN_LOST for A, live
// on, and keep serving B, whose round trip the client then makes.
//
// Modes (RPMA_PROVIDER=shm on both sides):
//   tail     the tail of each ring the client reads (the index the server, writing, bounds) is
//            set past anything the server wrote: the server's next answer on A fails (EPROTO)
//   garbage  every byte of A's four control pages is 0xa5 (heads, tails and flags)
#include <librpma.h>  // before common.h: it declares itself for C++
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cinttypes>

extern "C" {
#include "common.h"
}
#include "provider/shm/segment.h"

using rpma::shm::RingCtl;
using rpma::shm::RingId;
using rpma::shm::Segment;

namespace {

constexpr size_t kSize = 128 * 1024;  // the server's buffer: A uses the first half, B the second
constexpr size_t kHalf = kSize / 2;
constexpr size_t kMsg = 4096;
constexpr uint64_t kSeedA = 0xa1, kSeedB = 0xb2;

struct Mapping {
    char *base = nullptr;
    size_t len = 0;
};

// The one rpma-shm mapping of this process (there must be exactly one).
Mapping only_segment() {
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != nullptr);
    char line[512];
    Mapping m;
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        if (!strstr(line, "/memfd:rpma-shm")) continue;
        uintptr_t start = 0, end = 0;
        CHECK(sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &start, &end) == 2);
        m.base = reinterpret_cast<char *>(start);
        m.len = end - start;
        n++;
    }
    fclose(f);
    CHECK_EQ(n, 1);
    return m;
}

RingCtl *ring_ctl(const Mapping &m, RingId id) {
    uint32_t ring = static_cast<uint32_t>(m.len / 4 - Segment::kCtlSpace);
    CHECK(Segment::valid_ring_size(ring));
    CHECK_EQ(Segment::bytes_for(ring), m.len);
    return reinterpret_cast<RingCtl *>(
        m.base + static_cast<size_t>(id) * (Segment::kCtlSpace + static_cast<size_t>(ring)));
}

void scribble(const Mapping &m, const char *mode) {
    if (strcmp(mode, "tail") == 0) {
        // the server writes these rings; it has written far less than 2^40 bytes
        for (RingId id : {RingId::kMainToClient, RingId::kJoinToClient}) {
            RingCtl *c = ring_ctl(m, id);
            c->tail.store(c->head.load() + (uint64_t{1} << 40));
        }
        return;
    }
    // the whole control page of each ring, as bytes
    for (int i = 0; i < 4; ++i)
        memset(static_cast<void *>(ring_ctl(m, static_cast<RingId>(i))), 0xa5, Segment::kCtlSpace);
}

void server(const it_args *a) {
    rpma_peer *peer = it_peer_new(a->addr, true);
    char *buf = static_cast<char *>(it_alloc(kSize));
    rpma_mr_local *mr = nullptr;
    CHECK_OK(rpma_mr_reg(peer, buf, kSize, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC, &mr));
    char desc[IT_MR_DESC_SIZE];
    CHECK_OK(rpma_mr_get_descriptor(mr, desc));
    rpma_ep *ep = nullptr;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();

    rpma_conn_req *req = it_next_req(ep, nullptr);
    rpma_conn *conn_a = it_accept(&req, desc, sizeof(desc));
    req = it_next_req(ep, nullptr);
    rpma_conn *conn_b = it_accept(&req, desc, sizeof(desc));
    CHECK_EQ(it_shm_mappings(), 2);

    // A's corrupt rings end A, and only A
    enum rpma_conn_event ev = it_next_event(conn_a);
    printf("server: connection A: %s\n", rpma_utils_conn_event_2str(ev));
    if (ev != RPMA_CONN_LOST)
        IT_FAIL("connection A: %s, expected LOST", rpma_utils_conn_event_2str(ev));
    // B goes on: the client's round trip on it, then its disconnect
    it_disconnect_passive(&conn_b, false);
    CHECK_EQ(it_verify(buf, kMsg, kSeedA), -1);
    CHECK_EQ(it_verify(buf + kHalf, kHalf, kSeedB), -1);

    (void)rpma_conn_disconnect(conn_a);  // A is lost: the result does not matter
    CHECK_OK(rpma_conn_delete(&conn_a));
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
    printf("server: alive, B served after A was lost\n");
}

void client(const it_args *a, const char *mode) {
    rpma_peer *peer = it_peer_new(a->addr, false);
    char *buf = static_cast<char *>(it_alloc(kSize));
    rpma_mr_local *mr = nullptr;
    CHECK_OK(rpma_mr_reg(peer, buf, kSize, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &mr));

    // A works, on shm
    rpma_conn *conn_a = it_connect(peer, a->addr, a->port, nullptr, nullptr, 0);
    Mapping seg = only_segment();
    rpma_mr_remote *rmr_a = it_remote_mr(conn_a, 0);
    rpma_cq *cq_a = nullptr;
    CHECK_OK(rpma_conn_get_cq(conn_a, &cq_a));
    it_fill(buf, kMsg, kSeedA);
    CHECK_OK(rpma_write(conn_a, rmr_a, 0, mr, 0, kMsg, RPMA_F_COMPLETION_ALWAYS, (void *)0xa1));
    it_cq_expect(cq_a, IBV_WC_RDMA_WRITE, (void *)0xa1);

    rpma_conn *conn_b = it_connect(peer, a->addr, a->port, nullptr, nullptr, 0);
    CHECK_EQ(it_shm_mappings(), 2);

    // A's rings turn hostile; a read makes the server answer on them
    scribble(seg, mode);
    CHECK_OK(rpma_read(conn_a, mr, kHalf, rmr_a, 0, kMsg, RPMA_F_COMPLETION_ALWAYS, (void *)0xa2));
    enum rpma_conn_event ev = it_next_event(conn_a);
    printf("client: connection A: %s\n", rpma_utils_conn_event_2str(ev));
    if (ev != RPMA_CONN_LOST && ev != RPMA_CONN_CLOSED)
        IT_FAIL("connection A: %s after its rings were corrupted", rpma_utils_conn_event_2str(ev));
    ibv_wc wc;
    it_cq_get(cq_a, &wc);
    CHECK_EQ(wc.wr_id, 0xa2);
    if (wc.status == IBV_WC_SUCCESS) IT_FAIL("the read on the corrupted connection succeeded");
    printf("client: the read on A ended with %s\n", it_wc_status_str(wc.status));

    // B still works, both ways
    rpma_mr_remote *rmr_b = it_remote_mr(conn_b, 0);
    rpma_cq *cq_b = nullptr;
    CHECK_OK(rpma_conn_get_cq(conn_b, &cq_b));
    it_fill(buf, kHalf, kSeedB);
    CHECK_OK(
        rpma_write(conn_b, rmr_b, kHalf, mr, 0, kHalf, RPMA_F_COMPLETION_ALWAYS, (void *)0xb1));
    it_cq_expect(cq_b, IBV_WC_RDMA_WRITE, (void *)0xb1);
    memset(buf, 0, kSize);
    CHECK_OK(
        rpma_read(conn_b, mr, kHalf, rmr_b, kHalf, kHalf, RPMA_F_COMPLETION_ALWAYS, (void *)0xb2));
    it_cq_expect(cq_b, IBV_WC_RDMA_READ, (void *)0xb2);
    CHECK_EQ(it_verify(buf + kHalf, kHalf, kSeedB), -1);
    CHECK_OK(rpma_mr_remote_delete(&rmr_b));
    it_disconnect_active(&conn_b);

    CHECK_OK(rpma_mr_remote_delete(&rmr_a));
    (void)rpma_conn_disconnect(conn_a);
    CHECK_OK(rpma_conn_delete(&conn_a));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
}

}  // namespace

int main(int argc, char *argv[]) {
    it_args a;
    it_init(argc, argv, &a);
    if (a.argc < 1 || (strcmp(a.argv[0], "tail") && strcmp(a.argv[0], "garbage")))
        IT_FAIL("mode tail or garbage expected");
    const char *p = getenv("RPMA_PROVIDER");
    if (!p || strcmp(p, "shm") != 0) IT_FAIL("RPMA_PROVIDER=shm expected");
    if (a.server)
        server(&a);
    else
        client(&a, a.argv[0]);
    return 0;
}
