// FLUSH PERSISTENT calls msync over exactly the pages of the flushed range, once per flush;
// VISIBILITY flushes and writes never do. A client and a server in this one process talk over
// 127.0.0.1 (ports 49400-49499) to a file-backed MAP_SHARED region, and rpma::persist_stats()
// shows what the responder synced.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <librpma.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "provider/soft/persist.h"

namespace {

constexpr size_t kRegion = 64 * 1024;
constexpr int kWaitMs = 10000;

bool readable(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, ms) == 1;
}

class PersistTest : public ::testing::Test {
  protected:
    // one connection, its server side listening on the first free port of [base, base + 10)
    void Start(int base) {
        page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        char path[] = "/tmp/rpma_test_persist.XXXXXX";
        fd_ = mkstemp(path);
        ASSERT_GE(fd_, 0);
        unlink(path);
        ASSERT_EQ(ftruncate(fd_, kRegion), 0);
        void *m = mmap(nullptr, kRegion, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
        ASSERT_NE(m, MAP_FAILED);
        map_ = static_cast<char *>(m);
        src_.assign(kRegion, 0);

        ibv_context *ctx = nullptr;
        ASSERT_EQ(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx), 0);
        ASSERT_EQ(rpma_peer_new(ctx, &server_peer_), 0);
        ASSERT_EQ(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx), 0);
        ASSERT_EQ(rpma_peer_new(ctx, &client_peer_), 0);
        ASSERT_EQ(rpma_mr_reg(server_peer_, map_, kRegion,
                              RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC |
                                  RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT |
                                  RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
                              &server_mr_),
                  0);
        ASSERT_EQ(
            rpma_mr_reg(client_peer_, src_.data(), kRegion, RPMA_MR_USAGE_WRITE_SRC, &client_mr_),
            0);

        std::string port;
        for (int p = base; p < base + 10 && !ep_; p++) {
            port = std::to_string(p);
            if (rpma_ep_listen(server_peer_, "127.0.0.1", port.c_str(), &ep_) != 0) ep_ = nullptr;
        }
        ASSERT_NE(ep_, nullptr) << "no free port in [" << base << ", " << base + 10 << ")";

        // the client's connect is asynchronous: the server can take the request on this thread
        rpma_conn_req *creq = nullptr;
        ASSERT_EQ(rpma_conn_req_new(client_peer_, "127.0.0.1", port.c_str(), nullptr, &creq), 0);
        ASSERT_EQ(rpma_conn_req_connect(&creq, nullptr, &client_), 0);
        int epfd = -1;
        ASSERT_EQ(rpma_ep_get_fd(ep_, &epfd), 0);
        ASSERT_TRUE(readable(epfd, kWaitMs));
        rpma_conn_req *sreq = nullptr;
        ASSERT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &sreq), 0);
        char pdata[21 + 1];
        ASSERT_EQ(rpma_mr_get_descriptor(server_mr_, pdata), 0);
        rpma_peer_cfg *pcfg = nullptr;
        ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
        ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true), 0);
        ASSERT_EQ(rpma_peer_cfg_get_descriptor(pcfg, pdata + 21), 0);
        rpma_conn_private_data pd{pdata, static_cast<uint8_t>(sizeof(pdata))};
        ASSERT_EQ(rpma_conn_req_connect(&sreq, &pd, &server_), 0);
        ExpectEvent(server_, RPMA_CONN_ESTABLISHED);
        ExpectEvent(client_, RPMA_CONN_ESTABLISHED);

        rpma_conn_private_data got{};
        ASSERT_EQ(rpma_conn_get_private_data(client_, &got), 0);
        ASSERT_EQ(got.len, 196);  // as RDMA CM delivers an accept's private data
        ASSERT_EQ(rpma_mr_remote_from_descriptor(got.ptr, 21, &remote_), 0);
        rpma_peer_cfg *rcfg = nullptr;
        ASSERT_EQ(rpma_peer_cfg_from_descriptor(static_cast<char *>(got.ptr) + 21, 1, &rcfg), 0);
        ASSERT_EQ(rpma_conn_apply_remote_peer_cfg(client_, rcfg), 0);
        ASSERT_EQ(rpma_peer_cfg_delete(&rcfg), 0);
        ASSERT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
        ASSERT_EQ(rpma_conn_get_cq(client_, &cq_), 0);
    }

    void TearDown() override {
        if (client_) {
            EXPECT_EQ(rpma_conn_disconnect(client_), 0);
            ExpectEvent(client_, RPMA_CONN_CLOSED);
            ExpectEvent(server_, RPMA_CONN_CLOSED);
            EXPECT_EQ(rpma_conn_disconnect(server_), 0);
            EXPECT_EQ(rpma_conn_delete(&client_), 0);
            EXPECT_EQ(rpma_conn_delete(&server_), 0);
        }
        if (remote_) {
            EXPECT_EQ(rpma_mr_remote_delete(&remote_), 0);
        }
        if (ep_) {
            EXPECT_EQ(rpma_ep_shutdown(&ep_), 0);
        }
        if (client_mr_) {
            EXPECT_EQ(rpma_mr_dereg(&client_mr_), 0);
        }
        if (server_mr_) {
            EXPECT_EQ(rpma_mr_dereg(&server_mr_), 0);
        }
        if (client_peer_) {
            EXPECT_EQ(rpma_peer_delete(&client_peer_), 0);
        }
        if (server_peer_) {
            EXPECT_EQ(rpma_peer_delete(&server_peer_), 0);
        }
        if (map_) munmap(map_, kRegion);
        if (fd_ >= 0) close(fd_);
    }

    void ExpectEvent(rpma_conn *conn, rpma_conn_event want) {
        int fd = -1;
        ASSERT_EQ(rpma_conn_get_event_fd(conn, &fd), 0);
        ASSERT_TRUE(readable(fd, kWaitMs)) << "no event, expected " << want;
        rpma_conn_event ev = RPMA_CONN_UNDEFINED;
        ASSERT_EQ(rpma_conn_next_event(conn, &ev), 0);
        ASSERT_EQ(ev, want);
    }

    // one completion: success, with this wr_id and opcode
    void ExpectCompletion(uint64_t id, ibv_wc_opcode op) {
        int fd = -1;
        ASSERT_EQ(rpma_cq_get_fd(cq_, &fd), 0);
        for (int tries = 0; tries < 100; tries++) {
            ibv_wc wc{};
            int got = 0;
            int ret = rpma_cq_get_wc(cq_, 1, &wc, &got);
            if (ret == 0) {
                ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << "wr_id " << wc.wr_id;
                ASSERT_EQ(wc.wr_id, id);
                ASSERT_EQ(wc.opcode, op);
                return;
            }
            ASSERT_EQ(ret, RPMA_E_NO_COMPLETION);
            ASSERT_TRUE(readable(fd, kWaitMs)) << "no completion for wr_id " << id;
            ret = rpma_cq_wait(cq_);
            ASSERT_TRUE(ret == 0 || ret == RPMA_E_NO_COMPLETION) << ret;
        }
        FAIL() << "no completion for wr_id " << id;
    }

    void Write(size_t off, size_t len, uint8_t seed) {
        for (size_t i = 0; i < len; i++) src_[off + i] = static_cast<uint8_t>(seed + i * 7);
        ASSERT_EQ(rpma_write(client_, remote_, off, client_mr_, off, len, RPMA_F_COMPLETION_ALWAYS,
                             reinterpret_cast<void *>(1)),
                  0);
        ExpectCompletion(1, IBV_WC_RDMA_WRITE);
    }

    void Flush(size_t off, size_t len, rpma_flush_type type) {
        ASSERT_EQ(rpma_flush(client_, remote_, off, len, type, RPMA_F_COMPLETION_ALWAYS,
                             reinterpret_cast<void *>(2)),
                  0);
        ExpectCompletion(2, IBV_WC_RDMA_READ);
    }

    // the file (not the mapping) holds src_ over [off, off + len)
    void ExpectInFile(size_t off, size_t len) {
        std::vector<uint8_t> buf(len);
        ASSERT_EQ(pread(fd_, buf.data(), len, static_cast<off_t>(off)), static_cast<ssize_t>(len));
        ASSERT_EQ(std::memcmp(buf.data(), src_.data() + off, len), 0);
    }

    uintptr_t Base() const { return reinterpret_cast<uintptr_t>(map_); }

    size_t page_ = 4096;
    int fd_ = -1;
    char *map_ = nullptr;
    std::vector<uint8_t> src_;
    rpma_peer *server_peer_ = nullptr, *client_peer_ = nullptr;
    rpma_mr_local *server_mr_ = nullptr, *client_mr_ = nullptr;
    rpma_mr_remote *remote_ = nullptr;
    rpma_ep *ep_ = nullptr;
    rpma_conn *client_ = nullptr, *server_ = nullptr;
    rpma_cq *cq_ = nullptr;
};

TEST_F(PersistTest, PersistentFlushSyncsExactlyTheFlushedPages) {
    ASSERT_NO_FATAL_FAILURE(Start(49400));
    struct Range {
        size_t off, len;
    };
    const Range ranges[] = {
        {100, 50},                   // inside one page
        {page_ - 100, 200},          // across a page boundary
        {2 * page_, 2 * page_},      // exactly two aligned pages
        {3 * page_ + 1, 5 * page_},  // unaligned at both ends: six pages
        {0, 1},                      // the first byte
        {kRegion - 8, 8},            // the last 8 bytes (a flush's offset must leave 8 in the
                                     // region, as on RDMA: rpma_flush(3))
        {0, kRegion},                // everything
    };
    uint8_t seed = 1;
    for (const Range &r : ranges) {
        SCOPED_TRACE("flushed range [" + std::to_string(r.off) + ", " +
                     std::to_string(r.off + r.len) + ")");
        ASSERT_NO_FATAL_FAILURE(Write(r.off, r.len, seed++));
        rpma::PersistStats before = rpma::persist_stats();
        ASSERT_NO_FATAL_FAILURE(Flush(r.off, r.len, RPMA_FLUSH_TYPE_PERSISTENT));
        rpma::PersistStats after = rpma::persist_stats();
        uintptr_t begin = Base() + r.off / page_ * page_;
        uintptr_t end = Base() + (r.off + r.len + page_ - 1) / page_ * page_;
        EXPECT_EQ(after.calls, before.calls + 1);
        EXPECT_EQ(after.bytes, before.bytes + (end - begin));
        EXPECT_EQ(after.last_begin, begin);
        EXPECT_EQ(after.last_end, end);
        ASSERT_NO_FATAL_FAILURE(ExpectInFile(r.off, r.len));
    }
}

TEST_F(PersistTest, VisibilityFlushAndWritesDoNotSync) {
    ASSERT_NO_FATAL_FAILURE(Start(49410));
    rpma::PersistStats before = rpma::persist_stats();
    ASSERT_NO_FATAL_FAILURE(Write(0, 3 * page_, 9));
    ASSERT_NO_FATAL_FAILURE(Flush(0, 3 * page_, RPMA_FLUSH_TYPE_VISIBILITY));
    ASSERT_NO_FATAL_FAILURE(Write(page_ + 5, 100, 10));
    ASSERT_NO_FATAL_FAILURE(Flush(page_ + 5, 100, RPMA_FLUSH_TYPE_VISIBILITY));
    rpma::PersistStats after = rpma::persist_stats();
    EXPECT_EQ(after.calls, before.calls);
    EXPECT_EQ(after.bytes, before.bytes);
    EXPECT_EQ(after.last_begin, before.last_begin);
    EXPECT_EQ(after.last_end, before.last_end);
    // and the next PERSISTENT flush is counted, so the counters were live all along
    ASSERT_NO_FATAL_FAILURE(Flush(page_ + 5, 100, RPMA_FLUSH_TYPE_PERSISTENT));
    after = rpma::persist_stats();
    EXPECT_EQ(after.calls, before.calls + 1);
    EXPECT_EQ(after.last_begin, Base() + page_);
    EXPECT_EQ(after.last_end, Base() + 2 * page_);
}

TEST_F(PersistTest, EachPersistentFlushSyncsOnce) {
    ASSERT_NO_FATAL_FAILURE(Start(49420));
    rpma::PersistStats before = rpma::persist_stats();
    // several writes, one flush covering them: one msync of their pages
    ASSERT_NO_FATAL_FAILURE(Write(10, 10, 1));
    ASSERT_NO_FATAL_FAILURE(Write(page_ + 10, 10, 2));
    ASSERT_NO_FATAL_FAILURE(Write(3 * page_ - 10, 10, 3));
    ASSERT_NO_FATAL_FAILURE(Flush(10, 3 * page_ - 10, RPMA_FLUSH_TYPE_PERSISTENT));
    rpma::PersistStats mid = rpma::persist_stats();
    EXPECT_EQ(mid.calls, before.calls + 1);
    EXPECT_EQ(mid.bytes, before.bytes + 3 * page_);
    EXPECT_EQ(mid.last_begin, Base());
    EXPECT_EQ(mid.last_end, Base() + 3 * page_);
    // two flushes: two calls; the counters show the second one last
    ASSERT_NO_FATAL_FAILURE(Flush(5 * page_, 1, RPMA_FLUSH_TYPE_PERSISTENT));
    ASSERT_NO_FATAL_FAILURE(Flush(8 * page_ + 1, page_, RPMA_FLUSH_TYPE_PERSISTENT));
    rpma::PersistStats after = rpma::persist_stats();
    EXPECT_EQ(after.calls, mid.calls + 2);
    EXPECT_EQ(after.bytes, mid.bytes + page_ + 2 * page_);
    EXPECT_EQ(after.last_begin, Base() + 8 * page_);
    EXPECT_EQ(after.last_end, Base() + 10 * page_);
    ASSERT_NO_FATAL_FAILURE(ExpectInFile(0, 3 * page_));
}

}  // namespace
