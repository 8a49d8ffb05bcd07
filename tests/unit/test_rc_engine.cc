// The RC engine (requester, responder, completer) of two queue pairs joined by an in-memory
// transport instead of sockets: every operation, the NAK paths, RNR, ordering, the error flush
// and disconnect, driven step by step on the test thread.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <librpma.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "../support/bare_qp.h"
#include "../support/mem_stream.h"
#include "common/sanitizer.h"
#include "provider/rc/byte_stream.h"
#include "provider/rc/qp_internal.h"
#include "provider/rc/queue_pair.h"
#include "provider/soft/compl_channel.h"
#include "provider/soft/cq.h"
#include "provider/soft/engine.h"
#include "provider/soft/mr_table.h"

namespace rpma::rc {

using memio::Channel;
using memio::MemStream;

// The RC engine with no transport of its own: the test hands it its streams, as a transport
// does, through the queue pair's protected interface.
class TestQp final : public BareQp {
  public:
    using BareQp::BareQp;

    // Established over main and join (client: we send our requests on main), with no engine
    // registration: the test steps the streams itself.
    void establish(bool client, ByteStream *main, ByteStream *join) {
        (client ? main_ : join_).answers_in = true;
        main_.io = main;
        join_.io = join;
        for (Stream *s : {&main_, &join_}) {
            s->connected = true;
            s->rx_on = true;
        }
        conn_.set_peer(1, {});
        conn_.accept();
        progress_.handler(shared_from_this());  // as establish_stream does
    }
    Progress &progress() noexcept { return progress_; }
    Stream &stream(bool main) noexcept { return main ? main_ : join_; }
    bool in_error() {
        std::lock_guard lk(sq_mu_);
        return completer_.error();
    }
};

// Builds established queue pairs over MemStreams (TestQp) and steps them through their
// Progress, as the engine and the application's threads do.
struct QpTestAccess {
    static TestQp &test(QueuePair &qp) { return static_cast<TestQp &>(qp); }
    static Progress &progress(QueuePair &qp) { return test(qp).progress(); }
    static void establish(QueuePair &qp, bool client, ByteStream *main, ByteStream *join) {
        test(qp).establish(client, main, join);
    }
    // Reads what arrived on both streams and sends what is queued; join_first reads the
    // peer's requests before the answers to ours, as two TCP streams may deliver them.
    static void step(QueuePair &qp, bool join_first = false) {
        QpStream *first = &test(qp).stream(!join_first);
        QpStream *second = &test(qp).stream(join_first);
        for (QpStream *s : {first, second}) {
            if (s == &progress(qp).resp()) {
                {
                    std::lock_guard lk(s->mu);
                    s->flush_tx();
                }
                serve(qp);  // the responder task's, as the engine's events run it
                continue;
            }
            progress(qp).run_requester();  // as EPOLLOUT schedules it
            bool readable;
            {
                std::lock_guard lk(s->mu);
                readable = s->rx_on && !s->stalled();
            }
            if (readable) read_answers(qp);
        }
    }
    // Reads the answers to our requests, as the engine's EPOLLIN does (the completer; the end
    // of its read runs the requester).
    static void read_answers(QueuePair &qp) {
        std::lock_guard rl(progress(qp).req().rx_mu);
        progress(qp).read_stream(progress(qp).req());
    }
    // What a thread polling the CQ does with the answers (progress): owns the completer if it
    // is idle, reads, and lets it go.
    static void poll_answers(QueuePair &qp) {
        if (!progress(qp).task(Progress::Role::kCompleter).try_own()) return;
        read_answers(qp);
        progress(qp).run_completer(ByteStream::Reader::kPoller);
    }
    // The engine's EPOLLIN on the answer stream.
    static void answers_event(QueuePair &qp) {
        progress(qp).read_stream_if_free(progress(qp).req());
    }
    static Task::State completer(QueuePair &qp) {
        return progress(qp).task(Progress::Role::kCompleter).state();
    }
    // A waiter or poller takes the answer stream from the engine (Stream::take).
    static bool take_answers(QueuePair &qp) { return progress(qp).req().take(); }
    static bool engine_watches_answers(QueuePair &qp) {
        return progress(qp).req().sleeper.load() == QpStream::Sleeper::kEngine;
    }
    // The engine's check of taken streams, now, on its thread (it schedules no next check: only
    // these calls check).
    // true: a stream is still taken (the engine's timer would check again).
    static bool check_taken(QueuePair &qp, Engine &engine) {
        bool again = false;
        engine.run_sync([&] { again = progress(qp).check_taken(); });
        return again;
    }
    // EPOLLOUT on the request stream, as the engine handles it.
    static bool requests_writable(QueuePair &qp) {
        return progress(qp).on_writable(progress(qp).req(), true);
    }
    static Task::State requester(QueuePair &qp) {
        return progress(qp).task(Progress::Role::kRequester).state();
    }
    static const RankedMutex *requests_mu(QueuePair &qp) { return &progress(qp).req().mu; }
    // What the engine does when a receive is posted (recv_posted), on this thread.
    static void resume(QueuePair &qp) {
        progress(qp).request_resume();
        serve(qp);
    }
    // EPOLLOUT on the answer stream, as the engine handles it.
    static void writable(QueuePair &qp) { progress(qp).on_writable(progress(qp).resp(), true); }
    static size_t answers(QueuePair &qp) {
        std::lock_guard lk(progress(qp).resp().mu);
        return progress(qp).resp().tx.size();
    }
    static bool stalled(QueuePair &qp) {
        std::lock_guard lk(progress(qp).resp().mu);
        return progress(qp).resp().stalled();
    }
    // Reads the peer's requests only, as the engine's responder does (or arms its runner).
    static void serve(QueuePair &qp) { progress(qp).run_responder(ByteStream::Reader::kWaiter); }
    static bool in_error(QueuePair &qp) { return test(qp).in_error(); }
};

namespace {

class RcEngineTest : public ::testing::Test {
  protected:
    struct Side {
        MrTable mrs;
        ComplChannel channel;
        std::unique_ptr<Cq> cq;
        FdQueue<rpma_conn_event> events;
        std::shared_ptr<QueuePair> qp;
        std::vector<char> mem = std::vector<char>(64 * 1024);
        std::shared_ptr<Region> region;
        std::shared_ptr<prov::MemoryRegion> local;  // region, as a post names its source
    };

    void SetUp() override {
        auto c2s_main = std::make_shared<Channel>(), s2c_main = std::make_shared<Channel>();
        auto c2s_join = std::make_shared<Channel>(), s2c_join = std::make_shared<Channel>();
        streams_.push_back(std::make_unique<MemStream>(s2c_main, c2s_main));  // client main
        streams_.push_back(std::make_unique<MemStream>(s2c_join, c2s_join));  // client join
        streams_.push_back(std::make_unique<MemStream>(c2s_main, s2c_main));  // server main
        streams_.push_back(std::make_unique<MemStream>(c2s_join, s2c_join));  // server join
        make(client_, true, streams_[0].get(), streams_[1].get());
        make(server_, false, streams_[2].get(), streams_[3].get());
        server_answers_ = s2c_main;
        client_requests_ = c2s_main;
    }

    void TearDown() override {
        // as rpma_conn_delete does: once close returns the engine touches neither CQ
        client_.qp->close();
        server_.qp->close();
    }

    void make(Side &side, bool client, ByteStream *main, ByteStream *join) {
        side.cq = std::make_unique<Cq>(&side.channel, false);
        QpConfig cfg;
        cfg.sq_size = sq_size_;
        cfg.rq_size = 16;
        cfg.cq = side.cq.get();
        cfg.recv_cq = side.cq.get();
        if (!client) cfg.srq = srq_;
        side.qp = std::make_shared<TestQp>(&engine_, &side.mrs, cfg, &side.events);
        QpTestAccess::establish(*side.qp, client, main, join);
        side.region = side.mrs.add(side.mem.data(), side.mem.size(), kAllUsage);
        side.local = side.region;
    }

    // Steps both sides until `side`'s CQ holds a completion (or a bound passes).
    // The bound only catches a hang: threads serving beside the steps (under TSan, on a loaded
    // machine) may hold the completion back for a long while without anything being wrong.
    bool next_wc(Side &side, ibv_wc *wc, bool join_first = false) {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        for (int i = 0; std::chrono::steady_clock::now() < give_up; ++i) {
            int got = 0;
            if (side.cq->get_wc(1, wc, &got) == 0 && got == 1) return true;
            QpTestAccess::step(*client_.qp, join_first);
            QpTestAccess::step(*server_.qp);
            if (i > 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return false;
    }
    bool no_wc(Side &side) {
        for (int i = 0; i < 10; ++i) {
            QpTestAccess::step(*client_.qp);
            QpTestAccess::step(*server_.qp);
        }
        ibv_wc wc;
        int got = 0;
        return side.cq->get_wc(1, &wc, &got) == RPMA_E_NO_COMPLETION;
    }

    prov::SendWr wr(prov::WrOp op, uint64_t id, size_t off, uint32_t len, size_t roff) {
        prov::SendWr w;
        w.op = op;
        w.wr_id = id;
        w.local = client_.mem.data() + off;
        w.len = len;
        w.local_region = &client_.local;
        w.raddr = reinterpret_cast<uintptr_t>(server_.mem.data()) + roff;
        w.rkey = server_.region->rkey();
        return w;
    }
    prov::RecvWr recv_wr(Side &side, uint64_t id, size_t off, uint32_t len) {
        return prov::RecvWr{side.region, side.mem.data() + off, len, id, true};
    }

    static constexpr int kAllUsage =
        RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC |
        RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
        RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV;

    Engine engine_;
    std::vector<std::unique_ptr<MemStream>> streams_;
    Side client_, server_;
    std::shared_ptr<Channel> server_answers_;   // the server's answers to the client's requests
    std::shared_ptr<Channel> client_requests_;  // the client's requests, unread by the server
    uint32_t sq_size_ = 16;                     // set before SetUp
    RecvQueue *srq_ = nullptr;                  // the servers' SRQ, if set before SetUp
};

TEST_F(RcEngineTest, WritePlacesDataAndCompletes) {
    std::memset(client_.mem.data(), 'w', 4096);
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, 7, 0, 4096, 8192)), 0);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.wr_id, 7u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(std::count(server_.mem.begin() + 8192, server_.mem.begin() + 12288, 'w'), 4096);
    EXPECT_EQ(server_.mem[8191], 0);
    EXPECT_EQ(server_.mem[12288], 0);
}

TEST_F(RcEngineTest, UnsignaledCompleteSilentlyInOrder) {
    for (uint64_t i = 1; i <= 4; ++i) {
        auto w = wr(prov::WrOp::kWrite, i, i * 16, 16, i * 16);
        w.signaled = i == 4;
        ASSERT_EQ(client_.qp->post_send(prov::SendWr(w)), 0);
    }
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.wr_id, 4u);  // the signaled one only
    EXPECT_TRUE(no_wc(client_));
}

TEST_F(RcEngineTest, ReadReturnsTheData) {
    std::memset(server_.mem.data() + 100, 'r', 300);
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kRead, 9, 1000, 300, 100)), 0);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
    EXPECT_EQ(wc.byte_len, 300u);
    EXPECT_EQ(std::count(client_.mem.begin() + 1000, client_.mem.begin() + 1300, 'r'), 300);
}

// A read answer that cannot leave (the peer reads slowly: a small channel) still points into the
// region, so a write behind it waits (answers full) instead of changing what the answer will
// carry; once the answer leaves, the write runs, and both complete in order.
TEST_F(RcEngineTest, AWriteWaitsForTheReadAnswerBeforeIt) {
    std::memset(server_.mem.data(), 'A', 4096);
    std::memset(client_.mem.data() + 8192, 'B', 8);
    {
        std::lock_guard lk(server_answers_->mu);
        server_answers_->capacity = 64;
    }
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kRead, 1, 0, 4096, 0)), 0);
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, 2, 8192, 8, 0)), 0);
    QpTestAccess::step(*server_.qp);
    EXPECT_TRUE(QpTestAccess::stalled(*server_.qp));
    EXPECT_EQ(server_.mem[0], 'A');
    {
        std::lock_guard lk(server_answers_->mu);
        server_answers_->capacity = 256 * 1024;
    }
    QpTestAccess::writable(*server_.qp);  // the answer leaves, and the write goes on
    EXPECT_FALSE(QpTestAccess::stalled(*server_.qp));
    EXPECT_EQ(server_.mem[0], 'B');
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.wr_id, 1u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(std::count(client_.mem.begin(), client_.mem.begin() + 4096, 'A'), 4096);
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.wr_id, 2u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

// A send queue deep enough to leave more answers queued than the responder may hold.
class RcEngineDeepTest : public RcEngineTest {
  protected:
    void SetUp() override {
        sq_size_ = 2 * kMaxQueuedAnswers;
        RcEngineTest::SetUp();
    }
};

// A peer that does not read its answers cannot make the responder queue more than
// kMaxQueuedAnswers of them: the next request waits (answers full), unread, until they leave.
TEST_F(RcEngineDeepTest, AnswersFullHoldTheNextRequestBack) {
    {
        std::lock_guard lk(server_answers_->mu);
        server_answers_->capacity = 0;
    }
    constexpr uint64_t kReads = kMaxQueuedAnswers + 1;
    for (uint64_t i = 1; i <= kReads; ++i)
        ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kRead, i, 0, 0, 0)), 0);
    QpTestAccess::step(*client_.qp);  // the corked posts out
    QpTestAccess::step(*server_.qp);
    EXPECT_TRUE(QpTestAccess::stalled(*server_.qp));
    EXPECT_EQ(QpTestAccess::answers(*server_.qp), kMaxQueuedAnswers);
    {
        std::lock_guard lk(server_answers_->mu);
        server_answers_->capacity = 256 * 1024;
    }
    QpTestAccess::writable(*server_.qp);  // they leave, and the last read goes on
    EXPECT_FALSE(QpTestAccess::stalled(*server_.qp));
    ibv_wc wc;
    for (uint64_t i = 1; i <= kReads; ++i) {
        ASSERT_TRUE(next_wc(client_, &wc));
        EXPECT_EQ(wc.wr_id, i);
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    }
}

// Threads that wait on or poll a CQ serve the peer's requests (serve_requests), several at once:
// the responder task lets one run it at a time (a schedule during a pass arms it), so every
// write lands and completes in order (TSan sees any two passes overlap).
TEST_F(RcEngineTest, ThreadsServingAtOnceRunTheResponderOneAtATime) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> servers;
    for (int i = 0; i < 4; ++i)
        servers.emplace_back([&] {
            while (!stop.load()) QpTestAccess::serve(*server_.qp);
        });
    constexpr int kWrites = 64;
    for (int i = 0; i < kWrites; ++i) client_.mem[i] = static_cast<char>('a' + i % 26);
    for (int i = 0; i < kWrites; i += 8) {
        for (int j = i; j < i + 8; ++j)
            ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, j, j, 1, 1024 + j)), 0);
        ibv_wc wc;
        for (int j = i; j < i + 8; ++j) {
            ASSERT_TRUE(next_wc(client_, &wc));
            EXPECT_EQ(wc.wr_id, static_cast<uint64_t>(j));
            EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
        }
    }
    stop = true;
    for (auto &t : servers) t.join();
    EXPECT_TRUE(
        std::equal(client_.mem.begin(), client_.mem.begin() + kWrites, server_.mem.begin() + 1024));
}

TEST_F(RcEngineTest, AtomicWriteStoresTheValue) {
    auto w = wr(prov::WrOp::kAtomicWrite, 3, 0, 8, 64);
    w.value = 0x1122334455667788ull;
    ASSERT_EQ(client_.qp->post_send(prov::SendWr(w)), 0);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    uint64_t v;
    std::memcpy(&v, server_.mem.data() + 64, 8);
    EXPECT_EQ(v, 0x1122334455667788ull);
}

TEST_F(RcEngineTest, MisalignedAtomicWriteIsAnInvalidRequest) {
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kAtomicWrite, 3, 0, 8, 65)), 0);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
}

TEST_F(RcEngineTest, BadRkeyNaksAndFlushesTheRest) {
    auto bad = wr(prov::WrOp::kWrite, 1, 0, 64, 0);
    bad.rkey ^= 0x5a5a5a5a;
    ASSERT_EQ(client_.qp->post_send(prov::SendWr(bad)), 0);
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, 2, 0, 64, 0)), 0);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.wr_id, 1u);
    EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.wr_id, 2u);
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_TRUE(QpTestAccess::in_error(*client_.qp));
    EXPECT_TRUE(QpTestAccess::in_error(*server_.qp));  // the responder's QP as well
    EXPECT_EQ(server_.mem[0], 0);                      // nothing placed
    // a request posted in the error state is taken and flushed
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, 3, 0, 64, 0)), 0);
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(RcEngineTest, RangeOutsideTheRegionNaks) {
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kRead, 1, 0, 4096, 64 * 1024 - 100)), 0);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(RcEngineTest, FlushNeedsTheUsage) {
    auto region = server_.mrs.add(server_.mem.data(), 4096, RPMA_MR_USAGE_WRITE_DST);
    auto w = wr(prov::WrOp::kFlush, 5, 0, 64, 0);
    w.rkey = region->rkey();
    ASSERT_EQ(client_.qp->post_send(prov::SendWr(w)), 0);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(RcEngineTest, SendWaitsForAReceiveThenDelivers) {
    std::memset(client_.mem.data(), 's', 100);
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kSend, 11, 0, 100, 0)), 0);
    EXPECT_TRUE(no_wc(client_));  // RNR: the responder waits, nothing completes
    EXPECT_TRUE(no_wc(server_));
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 21, 4096, 200)), 0);
    QpTestAccess::resume(*server_.qp);  // what the engine does when a receive is posted
    ibv_wc wc;
    ASSERT_TRUE(next_wc(server_, &wc));
    EXPECT_EQ(wc.wr_id, 21u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV);
    EXPECT_EQ(wc.byte_len, 100u);
    EXPECT_EQ(std::count(server_.mem.begin() + 4096, server_.mem.begin() + 4196, 's'), 100);
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.wr_id, 11u);
    EXPECT_EQ(wc.opcode, IBV_WC_SEND);
}

// A receive posted while a send waits for one is served on the posting thread: the payload is
// placed and the receive completed before post_recv returns, with no hop through the engine
// (held busy here, so it could not have done it).
TEST_F(RcEngineTest, APostedReceiveServesTheWaitingSendOnThePostersThread) {
    std::memset(client_.mem.data(), 'p', 8);
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kSend, 11, 0, 8, 0)), 0);
    QpTestAccess::serve(*server_.qp);
    ASSERT_TRUE(QpTestAccess::stalled(*server_.qp));  // RNR
    std::promise<void> entered, release;
    std::shared_future<void> gate = release.get_future().share();
    engine_.post([&entered, gate] {
        entered.set_value();
        gate.wait();
    });
    entered.get_future().wait();
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 21, 4096, 64)), 0);
    EXPECT_FALSE(QpTestAccess::stalled(*server_.qp));
    EXPECT_FALSE(server_.cq->empty());  // no progress hook runs for empty()
    EXPECT_EQ(std::count(server_.mem.begin() + 4096, server_.mem.begin() + 4104, 'p'), 8);
    release.set_value();
    engine_.run_sync([] {});
    ibv_wc wc;
    ASSERT_TRUE(next_wc(server_, &wc));
    EXPECT_EQ(wc.wr_id, 21u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

// A stalled responder reads nothing more (its request waits staged), and with an edge-triggered
// registration no event comes again for what arrived meanwhile: the resume's pass reads it.
TEST_F(RcEngineTest, AResumeReadsWhatCameDuringTheStall) {
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kSend, 11, 0, 8, 0)), 0);
    QpTestAccess::serve(*server_.qp);
    ASSERT_TRUE(QpTestAccess::stalled(*server_.qp));  // RNR
    std::memset(client_.mem.data() + 64, 'd', 16);
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, 12, 64, 16, 1024)), 0);
    QpTestAccess::serve(*server_.qp);  // an event during the stall reads nothing
    EXPECT_EQ(server_.mem[1024], 0);
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 21, 4096, 64)), 0);
    QpTestAccess::resume(*server_.qp);
    engine_.run_sync([] {});  // and the engine's own resume (recv_posted) is over
    EXPECT_FALSE(QpTestAccess::stalled(*server_.qp));
    EXPECT_EQ(std::count(server_.mem.begin() + 1024, server_.mem.begin() + 1040, 'd'), 16);
    ibv_wc wc;
    int got = 0;
    ASSERT_EQ(server_.cq->get_wc(1, &wc, &got), 0);
    EXPECT_EQ(wc.wr_id, 21u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

// Two connections whose servers share one SRQ, both waiting for a receive (RNR): the fixture's
// pair, and a second one made here.
class RcEngineSrqTest : public RcEngineTest {
  protected:
    void SetUp() override {
        srq_ = &srq;
        RcEngineTest::SetUp();
        auto c2s_main = std::make_shared<Channel>(), s2c_main = std::make_shared<Channel>();
        auto c2s_join = std::make_shared<Channel>(), s2c_join = std::make_shared<Channel>();
        streams_.push_back(std::make_unique<MemStream>(s2c_main, c2s_main));
        streams_.push_back(std::make_unique<MemStream>(s2c_join, c2s_join));
        streams_.push_back(std::make_unique<MemStream>(c2s_main, s2c_main));
        streams_.push_back(std::make_unique<MemStream>(c2s_join, s2c_join));
        make(client2, true, streams_[4].get(), streams_[5].get());
        make(server2, false, streams_[6].get(), streams_[7].get());
    }
    void TearDown() override {
        client2.qp->close();
        if (!server2_closed) server2.qp->close();
        RcEngineTest::TearDown();
    }
    // A send from side's client that its server reads and stalls on (RNR), waiting on the SRQ.
    void send_and_wait(Side &client, Side &server, uint64_t id) {
        prov::SendWr w = wr(prov::WrOp::kSend, id, 0, 8, 0);
        w.local = client.mem.data();
        w.local_region = &client.local;
        ASSERT_EQ(client.qp->post_send(std::move(w)), 0);
        QpTestAccess::serve(*server.qp);
        ASSERT_TRUE(QpTestAccess::stalled(*server.qp));
    }
    bool received(Side &server, uint64_t id) {
        ibv_wc wc;
        int got = 0;
        return server.cq->get_wc(1, &wc, &got) == 0 && got == 1 && wc.wr_id == id &&
               wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV;
    }

    RecvQueue srq{8};
    Side client2, server2;
    bool server2_closed = false;
};

// Each post wakes one of the waiting connections, in the order they began to wait.
TEST_F(RcEngineSrqTest, EachPostResumesOneWaitingConnection) {
    send_and_wait(client2, server2, 31);
    send_and_wait(client_, server_, 11);
    ASSERT_EQ(srq.post(recv_wr(server_, 41, 4096, 64)), 0);
    engine_.run_sync([] {});  // the woken responder's pass (recv_posted)
    EXPECT_TRUE(received(server2, 41));
    EXPECT_TRUE(QpTestAccess::stalled(*server_.qp));  // not woken: it waits for the next
    ASSERT_EQ(srq.post(recv_wr(server_, 42, 4160, 64)), 0);
    engine_.run_sync([] {});
    EXPECT_TRUE(received(server_, 42));
}

// A connection that closes while it waits leaves the SRQ's waiters: the next post wakes the one
// still waiting (woken in its place, the closed one would take nothing, and the other would wait
// beside a posted receive).
TEST_F(RcEngineSrqTest, AClosedConnectionIsWokenNoMore) {
    send_and_wait(client2, server2, 31);
    send_and_wait(client_, server_, 11);
    server2.qp->close();
    server2_closed = true;
    ASSERT_EQ(srq.post(recv_wr(server_, 41, 4096, 64)), 0);
    engine_.run_sync([] {});
    EXPECT_TRUE(received(server_, 41));
}

// So does one that disconnects while it waits: its waiting request is dropped, it reads on to the
// peer's Disconnect, both sides get CLOSED, and the peer's send is flushed (found hanging: the
// request waited for a receive that the application, disconnecting, never posted).
TEST_F(RcEngineSrqTest, AConnectionThatDisconnectsWhileItWaitsClosesAndIsWokenNoMore) {
    send_and_wait(client2, server2, 31);
    send_and_wait(client_, server_, 11);
    ASSERT_EQ(server2.qp->disconnect(), 0);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!QpTestAccess::in_error(*server2.qp) && std::chrono::steady_clock::now() < give_up) {
        QpTestAccess::step(*server2.qp);
        QpTestAccess::step(*client2.qp);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(QpTestAccess::in_error(*server2.qp));
    EXPECT_EQ(server2.events.try_pop(), std::optional(RPMA_CONN_CLOSED));
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client2, &wc));
    EXPECT_EQ(wc.wr_id, 31u);
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
    ASSERT_EQ(srq.post(recv_wr(server_, 41, 4096, 64)), 0);
    engine_.run_sync([] {});
    EXPECT_TRUE(received(server_, 41));
}

TEST_F(RcEngineTest, SendWithImmediateCarriesIt) {
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 21, 0, 64)), 0);
    auto w = wr(prov::WrOp::kSendImm, 11, 0, 8, 0);
    w.imm = 0xabcd;
    ASSERT_EQ(client_.qp->post_send(prov::SendWr(w)), 0);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(server_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(wc.imm_data), 0xabcdu);
}

TEST_F(RcEngineTest, WriteWithImmediateWaitsForAReceiveThenDelivers) {
    std::memset(client_.mem.data(), 'i', 32);
    auto w = wr(prov::WrOp::kWriteImm, 11, 0, 32, 512);
    w.imm = 0x1234;
    ASSERT_EQ(client_.qp->post_send(prov::SendWr(w)), 0);
    EXPECT_TRUE(no_wc(server_));  // RNR: nothing placed, nothing completes
    EXPECT_EQ(server_.mem[512], 0);
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 21, 0, 0)), 0);
    QpTestAccess::resume(*server_.qp);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(server_, &wc));
    EXPECT_EQ(wc.wr_id, 21u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(ntohl(wc.imm_data), 0x1234u);
    EXPECT_EQ(std::count(server_.mem.begin() + 512, server_.mem.begin() + 544, 'i'), 32);
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
}

// The initiator's completion as rxe fills it: byte_len is the request's length (8 for an atomic
// write, and 8 for a flush, which upstream librpma posts as an 8-byte read), and IBV_WC_WITH_IMM
// marks a send or write with immediate.
TEST_F(RcEngineTest, InitiatorCompletionsCarryLengthAndImmediateFlag) {
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 21, 0, 0)), 0);
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 22, 1024, 128)), 0);
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 23, 2048, 128)), 0);
    struct Case {
        prov::WrOp op;
        uint32_t len;
        ibv_wc_opcode opcode;
        uint32_t byte_len;
        bool imm;
    };
    const Case cases[] = {
        {prov::WrOp::kWrite, 100, IBV_WC_RDMA_WRITE, 100, false},
        {prov::WrOp::kWrite, 0, IBV_WC_RDMA_WRITE, 0, false},
        {prov::WrOp::kWriteImm, 32, IBV_WC_RDMA_WRITE, 32, true},
        {prov::WrOp::kSend, 50, IBV_WC_SEND, 50, false},
        {prov::WrOp::kSendImm, 60, IBV_WC_SEND, 60, true},
        {prov::WrOp::kRead, 300, IBV_WC_RDMA_READ, 300, false},
        {prov::WrOp::kAtomicWrite, 8, IBV_WC_RDMA_WRITE, 8, false},
        {prov::WrOp::kFlush, 4096, IBV_WC_RDMA_READ, 8, false},
    };
    uint64_t id = 100;
    for (const Case &c : cases) {
        SCOPED_TRACE(id);
        auto w = wr(c.op, id, 0, c.len, 4096);
        w.imm = 7;
        ASSERT_EQ(client_.qp->post_send(prov::SendWr(w)), 0);
        ibv_wc wc;
        ASSERT_TRUE(next_wc(client_, &wc));
        EXPECT_EQ(wc.wr_id, id++);
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc.opcode, c.opcode);
        EXPECT_EQ(wc.byte_len, c.byte_len);
        EXPECT_EQ((wc.wc_flags & IBV_WC_WITH_IMM) != 0, c.imm);
    }
}

TEST_F(RcEngineTest, ARefusedWriteWithImmediateFailsTheReceiveItTook) {
    // as rxe: the receive is taken before the rkey is checked, and completes with the error;
    // the next one is flushed with the QP
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 21, 0, 0)), 0);
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 22, 0, 0)), 0);
    auto w = wr(prov::WrOp::kWriteImm, 11, 0, 32, 0);
    w.rkey = 0xdead;
    ASSERT_EQ(client_.qp->post_send(prov::SendWr(w)), 0);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
    ASSERT_TRUE(next_wc(server_, &wc));
    EXPECT_EQ(wc.wr_id, 21u);
    EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
    ASSERT_TRUE(next_wc(server_, &wc));
    EXPECT_EQ(wc.wr_id, 22u);
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(RcEngineTest, MessageLongerThanTheReceiveFailsBothSides) {
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 21, 0, 10)), 0);
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kSend, 11, 0, 100, 0)), 0);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(server_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_LOC_LEN_ERR);
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
}

TEST_F(RcEngineTest, AReplyNeverCompletesBeforeTheMessageItAnswers) {
    // client sends, server receives and replies at once; the client must see its SEND
    // completion before the RECV of the reply (the reply carries the server's ACK)
    ASSERT_EQ(client_.qp->post_recv(recv_wr(client_, 31, 0, 64)), 0);
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 21, 0, 64)), 0);
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kSend, 11, 100, 8, 0)), 0);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(server_, &wc));
    ASSERT_EQ(wc.opcode, IBV_WC_RECV);
    prov::SendWr reply;
    reply.op = prov::WrOp::kSend;
    reply.wr_id = 12;
    reply.local = server_.mem.data() + 200;
    reply.len = 8;
    reply.local_region = &server_.local;
    ASSERT_EQ(server_.qp->post_send(prov::SendWr(reply)), 0);
    // the client reads the server's request (the reply) before the server's ACK
    ASSERT_TRUE(next_wc(client_, &wc, true));
    EXPECT_EQ(wc.wr_id, 11u) << "the reply's RECV came before the SEND completion";
    ASSERT_TRUE(next_wc(client_, &wc, true));
    EXPECT_EQ(wc.wr_id, 31u);
}

TEST_F(RcEngineTest, LocalFaultCompletesWithLocalProtectionError) {
    auto w = wr(prov::WrOp::kWrite, 4, 0, 64, 0);
    w.local_fault = true;
    ASSERT_EQ(client_.qp->post_send(prov::SendWr(w)), 0);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR);
    EXPECT_EQ(server_.mem[0], 0);
}

TEST_F(RcEngineTest, DisconnectClosesBothSidesAndFlushesReceives) {
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 21, 0, 64)), 0);
    ASSERT_EQ(client_.qp->disconnect(), 0);
    bool client_closed = false, server_closed = false;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!(client_closed && server_closed) && std::chrono::steady_clock::now() < give_up) {
        QpTestAccess::step(*client_.qp);
        QpTestAccess::step(*server_.qp);
        if (auto e = client_.events.try_pop()) client_closed |= *e == RPMA_CONN_CLOSED;
        if (auto e = server_.events.try_pop()) server_closed |= *e == RPMA_CONN_CLOSED;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(client_closed);
    EXPECT_TRUE(server_closed);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(server_, &wc));
    EXPECT_EQ(wc.wr_id, 21u);
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

// The streams end without a Disconnect, as when the server's process dies: its kernel closes
// them, and RDMA CM reports that as a disconnect (CLOSED), not as a broken connection.
TEST_F(RcEngineTest, PeerVanishingMidStreamIsClosed) {
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, 1, 0, 64, 0)), 0);
    streams_[2]->shutdown(SHUT_RDWR);  // the server's end goes away before it answers
    streams_[3]->shutdown(SHUT_RDWR);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
    auto e = client_.events.try_pop();
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(*e, RPMA_CONN_CLOSED);
}

// The server acknowledged the send and then its process ended (both streams close), but the
// client reads its request stream's end before the answer stream: the ACK there still counts,
// as on a NIC, where what the peer sent before it went away arrives in order on the one wire
// (fidelity.memory.read_src_dereg: the send ahead of the reads completed WR_FLUSH_ERR).
TEST_F(RcEngineTest, AnAckSentBeforeThePeersEndStillCompletes) {
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 21, 0, 64)), 0);
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kSend, 11, 0, 8, 0)), 0);
    QpTestAccess::step(*client_.qp);   // the send goes out
    QpTestAccess::serve(*server_.qp);  // executed, and its ACK sent
    ibv_wc wc;
    int got = 0;
    ASSERT_EQ(server_.cq->get_wc(1, &wc, &got), 0);
    EXPECT_EQ(wc.wr_id, 21u);
    streams_[2]->shutdown(SHUT_RDWR);
    streams_[3]->shutdown(SHUT_RDWR);
    // join (the server's requests) first: its end is seen before the ACK on main
    ASSERT_TRUE(next_wc(client_, &wc, true));
    EXPECT_EQ(wc.wr_id, 11u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    std::optional<rpma_conn_event> e;
    for (int i = 0; i < 50 && !(e = client_.events.try_pop()); ++i)
        QpTestAccess::step(*client_.qp);  // then the answer stream's end
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(*e, RPMA_CONN_CLOSED);
}

// Only the request stream ends: the answer stream may still bring ACKs, so the connection
// waits for its end, and a peer that never ends it loses the connection after a grace
// (kLastAnswersWait), with what is outstanding flushed.
TEST_F(RcEngineTest, ARequestStreamEndAloneLosesTheConnectionAfterAGrace) {
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kSend, 11, 0, 8, 0)), 0);  // no receive
    QpTestAccess::step(*client_.qp);
    streams_[3]->shutdown(SHUT_RDWR);  // the server's requests to the client end, nothing else
    QpTestAccess::step(*client_.qp, true);
    ibv_wc wc;
    int got = 0;
    EXPECT_EQ(client_.cq->get_wc(1, &wc, &got), RPMA_E_NO_COMPLETION);  // not yet
    std::optional<rpma_conn_event> e;
    for (int i = 0; i < 2000 && !(e = client_.events.try_pop()); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the engine's timer
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(*e, RPMA_CONN_CLOSED);
    ASSERT_EQ(client_.cq->get_wc(1, &wc, &got), 0);
    EXPECT_EQ(wc.wr_id, 11u);
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

// Passes every call to the stream it wraps; the test streams below change one or two of them.
class ForwardingStream : public ByteStream {
  public:
    explicit ForwardingStream(ByteStream *s) noexcept : s_(s) {}
    ssize_t writev(const iovec *iov, int n) override { return s_->writev(iov, n); }
    ssize_t readv(const iovec *iov, int n) override { return s_->readv(iov, n); }
    void shutdown(int how) override { s_->shutdown(how); }
    Wait wait(uint32_t want) noexcept override { return s_->wait(want); }

  private:
    ByteStream *s_;
};

// A stream whose writes fail as a shm ring's do on a bad index (EPROTO): an error that, unlike
// a socket's, no readiness shows to the engine.
class FailingWrites final : public ForwardingStream {
  public:
    using ForwardingStream::ForwardingStream;
    ssize_t writev(const iovec *iov, int n) override {
        if (fail) {
            errno = EPROTO;
            return -1;
        }
        return ForwardingStream::writev(iov, n);
    }
    void shutdown(int how) override {
        ++shutdowns;
        ForwardingStream::shutdown(how);
    }
    bool fail = false;
    int shutdowns = 0;
};

class RcEngineWriteErrorTest : public RcEngineTest {
  protected:
    void SetUp() override {
        RcEngineTest::SetUp();
        io_ = std::make_unique<FailingWrites>(streams_[0].get());
        QpTestAccess::establish(*client_.qp, true, io_.get(), streams_[1].get());
    }
    std::unique_ptr<FailingWrites> io_;  // outlives TearDown's close
};

// The write error a posting thread finds ends the connection: the stream is shut down there, so
// the engine hears of it (found by integration.shm_hostile.garbage: the post hung, no LOST).
TEST_F(RcEngineWriteErrorTest, AWriteErrorAPostFindsEndsTheConnection) {
    io_->fail = true;
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, 1, 0, 64, 0)), 0);
    EXPECT_EQ(io_->shutdowns, 1);
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.wr_id, 1u);
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
    auto e = client_.events.try_pop();
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(*e, RPMA_CONN_LOST);
}

// A stream whose next write, once armed, stops until the test releases it: a handshake, no
// sleep, puts the test inside the responder between two of its steps. Its next read, once
// read_armed, stops the same way and then finds nothing (EAGAIN): a read that looked just before
// the input came.
class GatedStream final : public ForwardingStream {
  public:
    using ForwardingStream::ForwardingStream;
    ssize_t writev(const iovec *iov, int n) override {
        stop_if(armed);
        return ForwardingStream::writev(iov, n);
    }
    ssize_t readv(const iovec *iov, int n) override {
        if (!stop_if(read_armed)) return ForwardingStream::readv(iov, n);
        errno = EAGAIN;
        return -1;
    }
    std::atomic<bool> armed{false}, read_armed{false};
    std::promise<void> entered, release;

  private:
    bool stop_if(std::atomic<bool> &gate) {
        if (!gate.exchange(false)) return false;
        entered.set_value();
        release.get_future().wait();
        return true;
    }
};

class RcEngineGatedAnswerTest : public RcEngineTest {
  protected:
    void SetUp() override {
        RcEngineTest::SetUp();
        io_ = std::make_unique<GatedStream>(streams_[2].get());  // the server's answers
        QpTestAccess::establish(*server_.qp, false, io_.get(), streams_[3].get());
    }
    prov::SendWr server_write(uint64_t id) {
        prov::SendWr w;
        w.op = prov::WrOp::kWrite;
        w.wr_id = id;
        w.local = server_.mem.data();
        w.len = 8;
        w.local_region = &server_.local;
        w.raddr = reinterpret_cast<uintptr_t>(client_.mem.data());
        w.rkey = client_.region->rkey();
        return w;
    }
    std::unique_ptr<GatedStream> io_;  // outlives TearDown's close
};

// A failed receive puts the queue pair in the error state, and a request posted from then on
// completes (flushed) after every older one, even while the NAK is still on its way out (the
// step-(c) gap: the error flag was set, and sq_mu_ released, before the NAK's flush).
TEST_F(RcEngineGatedAnswerTest, APostAfterAFailedReceiveCompletesAfterOlderRequests) {
    ASSERT_EQ(server_.qp->post_recv(recv_wr(server_, 21, 0, 10)), 0);
    ASSERT_EQ(server_.qp->post_send(server_write(22)), 0);  // never answered: the client waits
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kSend, 11, 0, 100, 0)), 0);  // too long
    io_->armed = true;  // the NAK's write stops
    auto served = std::async(std::launch::async, [&] { QpTestAccess::serve(*server_.qp); });
    ASSERT_EQ(io_->entered.get_future().wait_for(std::chrono::seconds(20)),
              std::future_status::ready);
    ASSERT_EQ(server_.qp->post_send(server_write(23)), 0);
    io_->release.set_value();
    served.get();
    std::vector<std::pair<uint64_t, ibv_wc_status>> got;
    ibv_wc wc[4];
    int n = 0;
    ASSERT_EQ(server_.cq->get_wc(4, wc, &n), 0);
    for (int i = 0; i < n; ++i) got.emplace_back(wc[i].wr_id, wc[i].status);
    std::vector<std::pair<uint64_t, ibv_wc_status>> want{
        {21, IBV_WC_LOC_LEN_ERR}, {22, IBV_WC_WR_FLUSH_ERR}, {23, IBV_WC_WR_FLUSH_ERR}};
    EXPECT_EQ(got, want);
}

// The wait hook's view: a thread waits for this mutex (a post for the request stream's lock).
std::atomic<const RankedMutex *> g_waited_for{nullptr};
std::promise<void> *g_waits = nullptr;
void on_wait(const RankedMutex *m) {
    if (m == g_waited_for.load() && g_waits) std::exchange(g_waits, nullptr)->set_value();
}

// The request stream's transmit side is a task (the requester): whoever sends is its runner,
// and a post or an answer reader that finds it running arms it instead of waiting.
class RcEngineGatedRequestTest : public RcEngineTest {
  protected:
    void SetUp() override {
        RcEngineTest::SetUp();
        io_ = std::make_unique<GatedStream>(streams_[0].get());  // the client's requests
        QpTestAccess::establish(*client_.qp, true, io_.get(), streams_[1].get());
    }
    void TearDown() override {
        RankedMutex::set_wait_hook(nullptr);
        g_waits = nullptr;
        RcEngineTest::TearDown();
    }
    size_t queued_bytes() {
        std::lock_guard lk(client_requests_->mu);
        return client_requests_->bytes.size();
    }
    // Opens the gate once; declared after the futures that wait on it, so a failed assertion
    // opens it before their destructors wait.
    struct Gate {
        GatedStream *io;
        bool opened = false;
        void open() {
            if (!std::exchange(opened, true)) io->release.set_value();
        }
        ~Gate() { open(); }
    };
    std::unique_ptr<GatedStream> io_;  // outlives TearDown's close
};

// A post while another thread's post is inside its send: both frames leave with no answer read
// (the runner, armed, passes again, or the second post finds it idle and sends its own).
TEST_F(RcEngineGatedRequestTest, APostWhileAnotherThreadSendsGoesOutWithoutAnAnswer) {
    io_->armed = true;
    std::future<int> first, second;
    Gate gate{io_.get()};
    first = std::async(std::launch::async,
                       [&] { return client_.qp->post_send(wr(prov::WrOp::kWrite, 1, 0, 16, 0)); });
    ASSERT_EQ(io_->entered.get_future().wait_for(std::chrono::seconds(20)),
              std::future_status::ready);
    EXPECT_NE(QpTestAccess::requester(*client_.qp), Task::State::kIdle);
    std::promise<void> waits;
    g_waits = &waits;
    g_waited_for = QpTestAccess::requests_mu(*client_.qp);
    RankedMutex::set_wait_hook(on_wait);
    second = std::async(std::launch::async, [&] {
        return client_.qp->post_send(wr(prov::WrOp::kWrite, 2, 16, 16, 16));
    });
    ASSERT_EQ(waits.get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready);
    gate.open();
    EXPECT_EQ(first.get(), 0);
    EXPECT_EQ(second.get(), 0);
    EXPECT_EQ(QpTestAccess::requester(*client_.qp), Task::State::kIdle);
    EXPECT_EQ(queued_bytes(), 2 * (kHeaderSize + 16));  // both out, nothing read by anyone
    ibv_wc wc;
    for (uint64_t id = 1; id <= 2; ++id) {
        ASSERT_TRUE(next_wc(client_, &wc));
        EXPECT_EQ(wc.wr_id, id);
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    }
}

// The answer reader finds a post inside its send: it arms the requester and returns (before, it
// skipped the send or, with posts held for it, waited for the lock); the runner passes again.
TEST_F(RcEngineGatedRequestTest, TheAnswerReaderArmsARunningRequesterInsteadOfWaiting) {
    if (kThreadSanitizer)
        GTEST_SKIP() << "under TSan a completion waits for a send in progress, to show TSan the "
                        "order (QueuePair::source_faulted)";
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, 1, 0, 16, 0)), 0);
    QpTestAccess::serve(*server_.qp);  // its ACK waits in the client's answer stream
    io_->armed = true;
    std::future<int> post;
    std::future<void> read;
    Gate gate{io_.get()};
    post = std::async(std::launch::async,
                      [&] { return client_.qp->post_send(wr(prov::WrOp::kWrite, 2, 16, 16, 16)); });
    ASSERT_EQ(io_->entered.get_future().wait_for(std::chrono::seconds(20)),
              std::future_status::ready);
    read = std::async(std::launch::async, [&] { QpTestAccess::read_answers(*client_.qp); });
    ASSERT_EQ(read.wait_for(std::chrono::seconds(20)), std::future_status::ready);
    EXPECT_EQ(QpTestAccess::requester(*client_.qp), Task::State::kArmed);
    ibv_wc wc;
    int got = 0;
    ASSERT_EQ(client_.cq->get_wc(1, &wc, &got), 0);  // the answer was read meanwhile
    EXPECT_EQ(wc.wr_id, 1u);
    gate.open();
    EXPECT_EQ(post.get(), 0);
    EXPECT_EQ(QpTestAccess::requester(*client_.qp), Task::State::kIdle);
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.wr_id, 2u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

// The answer stream is registered edge-triggered: the engine's event while a poller owns the
// completer only arms it, and the poller reads again before it lets the task go, so an answer
// that came just after its read looked is not left with no edge to announce it.
TEST_F(RcEngineGatedRequestTest, AnEventWhileAPollerReadsIsReadBeforeItLetsGo) {
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, 1, 0, 16, 0)), 0);
    io_->read_armed = true;
    std::future<void> polled;
    Gate gate{io_.get()};
    polled = std::async(std::launch::async, [&] { QpTestAccess::poll_answers(*client_.qp); });
    ASSERT_EQ(io_->entered.get_future().wait_for(std::chrono::seconds(20)),
              std::future_status::ready);
    QpTestAccess::serve(*server_.qp);  // the ACK comes after the poller's read looked
    QpTestAccess::answers_event(*client_.qp);
    EXPECT_EQ(QpTestAccess::completer(*client_.qp), Task::State::kArmed);
    gate.open();
    polled.get();
    EXPECT_EQ(QpTestAccess::completer(*client_.qp), Task::State::kIdle);
    ibv_wc wc;
    int got = 0;
    ASSERT_EQ(client_.cq->get_wc(1, &wc, &got), 0);  // with no other event or read
    EXPECT_EQ(wc.wr_id, 1u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

// A stream a waiting or polling thread took stays off the engine's mask while threads read it,
// and goes back to the engine once a check finds that none did since the last one (a thread
// that stops waiting or polling says nothing).
TEST_F(RcEngineTest, ATakenStreamGoesBackToTheEngineOnceNoThreadReadsIt) {
    EXPECT_TRUE(QpTestAccess::take_answers(*client_.qp));          // the engine's until now
    EXPECT_FALSE(QpTestAccess::take_answers(*client_.qp));         // taken: only marked as read
    EXPECT_TRUE(QpTestAccess::check_taken(*client_.qp, engine_));  // checked again later
    EXPECT_FALSE(QpTestAccess::engine_watches_answers(*client_.qp));
    EXPECT_FALSE(QpTestAccess::take_answers(*client_.qp));  // read again before the next check
    EXPECT_TRUE(QpTestAccess::check_taken(*client_.qp, engine_));
    EXPECT_FALSE(QpTestAccess::engine_watches_answers(*client_.qp));
    // nobody read it since: given back, and no stream is left for another check
    EXPECT_FALSE(QpTestAccess::check_taken(*client_.qp, engine_));
    EXPECT_TRUE(QpTestAccess::engine_watches_answers(*client_.qp));
    EXPECT_TRUE(QpTestAccess::take_answers(*client_.qp));  // taken anew
}

// Counts the writes (system calls, on a socket) of the stream it wraps.
class CountingWrites final : public ForwardingStream {
  public:
    using ForwardingStream::ForwardingStream;
    ssize_t writev(const iovec *iov, int n) override {
        ++writes;
        return ForwardingStream::writev(iov, n);
    }
    std::atomic<int> writes{0};
};

class RcEngineCountedRequestTest : public RcEngineTest {
  protected:
    void SetUp() override {
        RcEngineTest::SetUp();
        io_ = std::make_unique<CountingWrites>(streams_[0].get());  // the client's requests
        QpTestAccess::establish(*client_.qp, true, io_.get(), streams_[1].get());
    }
    size_t queued_bytes() {
        std::lock_guard lk(client_requests_->mu);
        return client_requests_->bytes.size();
    }
    std::unique_ptr<CountingWrites> io_;  // outlives TearDown's close
};

// Below kCorkDepth every post is one write; at depth, with an answer due, posts only queue, and
// the thread that reads that answer sends them all in one write.
TEST_F(RcEngineCountedRequestTest, PostsAtDepthGoOutInOneWriteWithTheAnswer) {
    constexpr uint64_t kHeld = 5;
    for (uint64_t i = 1; i < kCorkDepth; ++i)
        ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, i, i * 16, 16, i * 16)), 0);
    EXPECT_EQ(io_->writes.load(), static_cast<int>(kCorkDepth - 1));
    for (uint64_t i = kCorkDepth; i < kCorkDepth + kHeld; ++i)
        ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, i, i * 16, 16, i * 16)), 0);
    EXPECT_EQ(io_->writes.load(), static_cast<int>(kCorkDepth - 1));  // held for the answers
    EXPECT_EQ(queued_bytes(), (kCorkDepth - 1) * (kHeaderSize + 16));
    QpTestAccess::serve(*server_.qp);
    QpTestAccess::read_answers(*client_.qp);
    EXPECT_EQ(io_->writes.load(), static_cast<int>(kCorkDepth));  // all held ones in one write
    EXPECT_EQ(queued_bytes(), kHeld * (kHeaderSize + 16));
    ibv_wc wc;
    for (uint64_t i = 1; i < kCorkDepth + kHeld; ++i) {
        ASSERT_TRUE(next_wc(client_, &wc));
        EXPECT_EQ(wc.wr_id, i);
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    }
}

// A full request stream keeps the frames queued; a post meanwhile only joins them, and EPOLLOUT
// runs the requester, which sends them all in one write.
TEST_F(RcEngineCountedRequestTest, AFullStreamSendsOnWritableInOneWrite) {
    {
        std::lock_guard lk(client_requests_->mu);
        client_requests_->capacity = 0;
    }
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, 1, 0, 16, 0)), 0);
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kWrite, 2, 16, 16, 16)), 0);
    EXPECT_EQ(io_->writes.load(), 1);  // the first found it full; the second joined it
    {
        std::lock_guard lk(client_requests_->mu);
        client_requests_->capacity = 256 * 1024;
    }
    EXPECT_TRUE(QpTestAccess::requests_writable(*client_.qp));
    EXPECT_EQ(io_->writes.load(), 2);
    EXPECT_EQ(queued_bytes(), 2 * (kHeaderSize + 16));
    ibv_wc wc;
    for (uint64_t id = 1; id <= 2; ++id) {
        ASSERT_TRUE(next_wc(client_, &wc));
        EXPECT_EQ(wc.wr_id, id);
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    }
}

// A malformed frame ends the connection (LOST) and never reaches memory.
class RcEngineProtocolTest : public RcEngineTest {
  protected:
    void inject(size_t stream, uint8_t op, uint32_t length, uint64_t aux) {
        FrameHeader h{};
        h.op = op;
        h.length = length;
        h.aux = aux;
        iovec v{&h, sizeof(h)};
        ASSERT_EQ(streams_[stream]->writev(&v, 1), static_cast<ssize_t>(sizeof(h)));
    }
    bool lost(Side &side) {
        for (int i = 0; i < 50; ++i) {
            QpTestAccess::step(*client_.qp);
            QpTestAccess::step(*server_.qp);
            if (auto e = side.events.try_pop()) return *e == RPMA_CONN_LOST;
        }
        return false;
    }
};

TEST_F(RcEngineProtocolTest, OversizedRequestIsLost) {
    // a send: with no receive posted, only the length check ends it (else it waits, RNR)
    inject(0, static_cast<uint8_t>(Op::kSend), kMaxOpLength + 1, 0);  // client main: requests
    EXPECT_TRUE(lost(server_));
}

TEST_F(RcEngineProtocolTest, AnswerOnTheRequestStreamIsLost) {
    inject(0, static_cast<uint8_t>(Op::kAck), 0, 1);
    EXPECT_TRUE(lost(server_));
}

// The answer cases are the completer's own (test_rc_completer.cc); this one checks the queue
// pair's side of them: the connection is lost and what was outstanding flushes.
TEST_F(RcEngineProtocolTest, ReadDataOfTheWrongLengthIsLost) {
    ASSERT_EQ(client_.qp->post_send(wr(prov::WrOp::kRead, 1, 0, 64, 0)), 0);
    inject(2, static_cast<uint8_t>(Op::kReadResp), 32, 1);  // before the server's real answer
    EXPECT_TRUE(lost(client_));
    ibv_wc wc;
    ASSERT_TRUE(next_wc(client_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

}  // namespace

}  // namespace rpma::rc
