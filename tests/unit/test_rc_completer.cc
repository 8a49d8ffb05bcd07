// The completer alone (rc/completer.h): crafted answers go into an in-memory stream, and the
// send queue's completions come out of a CQ in order. No queue pair, no engine, no peer.
#include <gtest/gtest.h>
#include <librpma.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "../support/frame_input.h"
#include "common/ranked_mutex.h"
#include "provider/rc/completer.h"
#include "provider/rc/send_queue.h"
#include "provider/soft/compl_channel.h"
#include "provider/soft/cq.h"
#include "provider/soft/region.h"

namespace rpma::rc {
namespace {

// What the queue pair would do, counted.
class FakeHost final : public Completer::Host {
  public:
    bool source_faulted(uint64_t seq) override { return faults.erase(seq) > 0; }
    void flush_receives() override { ++receive_flushes; }
    void resume_responder() override { ++resumes; }

    std::set<uint64_t> faults;
    int receive_flushes = 0;
    int resumes = 0;
};

class RcCompleterTest : public ::testing::Test {
  protected:
    static constexpr uint32_t kQpNum = 5, kSqSize = 8;

    RcCompleterTest()
        : completer_(sq_, sq_mu_, Completer::Target{&cq_, kQpNum, &remote_qp_}, host_) {}

    uint64_t post(Op op, uint64_t wr_id, uint32_t len = 16, bool signaled = true) {
        Wqe w;
        w.wr_id = wr_id;
        w.op = op;
        w.signaled = signaled;
        w.len = len;
        std::lock_guard lk(sq_mu_);
        return sq_.post(std::move(w));
    }
    uint64_t post_read(uint64_t wr_id, char *dst, uint32_t len,
                       std::shared_ptr<Region> region = nullptr) {
        Wqe w;
        w.wr_id = wr_id;
        w.op = Op::kRead;
        w.signaled = true;
        w.dst = dst;
        w.len = len;
        w.dst_region = std::move(region);
        std::lock_guard lk(sq_mu_);
        return sq_.post(std::move(w));
    }

    // One frame from the peer's responder, and a payload's bytes.
    void answer(Op op, uint64_t seq, uint32_t length = 0, uint16_t status = 0) {
        FrameHeader h{};
        h.op = static_cast<uint8_t>(op);
        h.status = status;
        h.length = length;
        h.aux = seq;
        bytes(&h, sizeof(h));
    }
    void bytes(const void *p, size_t n) { input_.bytes(p, n); }
    Step read() { return input_.read(completer_); }
    std::vector<ibv_wc> wcs() { return memio::take_wcs(cq_); }
    // The statuses of what completed, in order.
    std::vector<ibv_wc_status> statuses() {
        std::vector<ibv_wc_status> out;
        for (const ibv_wc &wc : wcs()) out.push_back(wc.status);
        return out;
    }
    using Statuses = std::vector<ibv_wc_status>;
    bool in_error() {
        std::lock_guard lk(sq_mu_);
        return completer_.error();
    }
    uint32_t unreclaimed() {
        std::lock_guard lk(sq_mu_);
        return completer_.unreclaimed();
    }
    void expect_fatal(const char *why) {
        EXPECT_EQ(read(), Step::kFatal);
        ASSERT_NE(completer_.end().why, nullptr);
        EXPECT_STREQ(completer_.end().why, why);
        EXPECT_TRUE(completer_.end().protocol);
    }

    ComplChannel channel_;
    Cq cq_{&channel_, false};
    RankedMutex sq_mu_{1};
    SendQueue sq_;
    uint32_t remote_qp_ = 77;
    FakeHost host_;
    Completer completer_;
    memio::FrameInput input_;
};

TEST_F(RcCompleterTest, AnAckCompletesEverythingUpToItInOrder) {
    post(Op::kWrite, 1);
    post(Op::kWrite, 2, 16, false);
    post(Op::kSend, 3, 40);
    answer(Op::kAck, 2);
    EXPECT_EQ(read(), Step::kBlock);
    auto got = wcs();
    ASSERT_EQ(got.size(), 1u);  // the unsignaled one completes silently
    EXPECT_EQ(got[0].wr_id, 1u);
    EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[0].opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(got[0].byte_len, 16u);
    EXPECT_EQ(got[0].qp_num, kQpNum);
    EXPECT_EQ(got[0].src_qp, 77u);
    EXPECT_EQ(unreclaimed(), 1u);  // its slot stays taken until a signaled one completes
    answer(Op::kAck, 3);
    EXPECT_EQ(read(), Step::kBlock);
    got = wcs();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].wr_id, 3u);
    EXPECT_EQ(got[0].opcode, IBV_WC_SEND);
    EXPECT_EQ(got[0].byte_len, 40u);
    EXPECT_EQ(unreclaimed(), 0u);
    EXPECT_FALSE(in_error());
}

TEST_F(RcCompleterTest, AHeaderSplitAcrossReadsWaitsForItsRest) {
    post(Op::kWrite, 1);
    FrameHeader h{};
    h.op = static_cast<uint8_t>(Op::kAck);
    h.aux = 1;
    bytes(&h, 10);
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_TRUE(wcs().empty());
    bytes(reinterpret_cast<char *>(&h) + 10, sizeof(h) - 10);
    EXPECT_EQ(read(), Step::kBlock);
    auto got = wcs();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].wr_id, 1u);
}

struct NakCase {
    uint16_t status;
    ibv_wc_status wc;
};

class RcCompleterNakTest : public RcCompleterTest, public ::testing::WithParamInterface<NakCase> {};

// A NAK says everything before its request was done, fails that request with its status, and
// puts the queue pair in the error state: the rest flush, the receives after them.
TEST_P(RcCompleterNakTest, FailsItsRequestAndFlushesTheRest) {
    post(Op::kWrite, 1);
    post(Op::kWrite, 2);
    post(Op::kRead, 3, 8);
    answer(Op::kNak, 2, 0, GetParam().status);
    EXPECT_EQ(read(), Step::kBlock);
    auto got = wcs();
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0].wr_id, 1u);
    EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[1].wr_id, 2u);
    EXPECT_EQ(got[1].status, GetParam().wc);
    EXPECT_EQ(got[1].byte_len, 0u);  // as rxe: an error completion carries no length
    EXPECT_EQ(got[2].wr_id, 3u);
    EXPECT_EQ(got[2].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(got[2].opcode, IBV_WC_RDMA_READ);
    EXPECT_TRUE(in_error());
    EXPECT_EQ(host_.receive_flushes, 1);
    // answers that come after the error state complete nothing more
    answer(Op::kAck, 3);
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_TRUE(wcs().empty());
}

INSTANTIATE_TEST_SUITE_P(
    NakStatuses, RcCompleterNakTest,
    ::testing::Values(NakCase{static_cast<uint16_t>(NakStatus::kAccess), IBV_WC_REM_ACCESS_ERR},
                      NakCase{static_cast<uint16_t>(NakStatus::kInvalidRequest),
                              IBV_WC_REM_INV_REQ_ERR},
                      NakCase{static_cast<uint16_t>(NakStatus::kOperation), IBV_WC_REM_OP_ERR},
                      NakCase{99, IBV_WC_REM_OP_ERR}));  // unknown: a remote operation error

TEST_F(RcCompleterTest, ReadDataLandsInItsDestinationAndCompletes) {
    std::vector<char> dst(300, 0);
    post_read(9, dst.data(), 300);
    post(Op::kWrite, 10);
    std::vector<char> data(300, 'r');
    answer(Op::kReadResp, 1, 300);
    bytes(data.data(), data.size());
    answer(Op::kAck, 2);  // behind the read, in the order the peer executed them
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(dst, data);
    auto got = wcs();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].wr_id, 9u);
    EXPECT_EQ(got[0].opcode, IBV_WC_RDMA_READ);
    EXPECT_EQ(got[0].byte_len, 300u);
    EXPECT_EQ(got[1].wr_id, 10u);
}

TEST_F(RcCompleterTest, LargeReadDataGoesStraightToItsDestination) {
    constexpr uint32_t kLen = 200 * 1024;  // more than the staging buffer holds
    std::vector<char> dst(kLen, 0), data(kLen);
    for (uint32_t i = 0; i < kLen; ++i) data[i] = static_cast<char>(i * 7);
    post_read(1, dst.data(), kLen);
    answer(Op::kReadResp, 1, kLen);
    bytes(data.data(), data.size());
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(dst, data);
    auto got = wcs();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[0].byte_len, kLen);
}

TEST_F(RcCompleterTest, ReadDataForADeregisteredDestinationFailsLocally) {
    std::vector<char> dst(64, 0);
    auto region = std::make_shared<Region>(dst.data(), dst.size(), RPMA_MR_USAGE_READ_DST, 1);
    post_read(1, dst.data(), 64, region);
    post(Op::kWrite, 2);
    region->kill();  // rpma_mr_dereg before the data came
    answer(Op::kReadResp, 1, 64);
    std::vector<char> data(64, 'x');
    bytes(data.data(), data.size());
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(dst, std::vector<char>(64, 0));  // not a byte placed
    EXPECT_EQ(statuses(), (Statuses{IBV_WC_LOC_PROT_ERR, IBV_WC_WR_FLUSH_ERR}));
    EXPECT_TRUE(in_error());
}

TEST_F(RcCompleterTest, ReadDataAfterTheErrorStateIsSkipped) {
    std::vector<char> dst(32, 0);
    post(Op::kWrite, 1);
    post_read(2, dst.data(), 32);
    answer(Op::kNak, 1, 0, static_cast<uint16_t>(NakStatus::kAccess));
    std::vector<char> data(32, 'd');
    answer(Op::kReadResp, 2, 32);  // the peer answered before it heard of the error
    bytes(data.data(), data.size());
    answer(Op::kAck, 2);  // parsed after the skipped bytes: no protocol error
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(dst, std::vector<char>(32, 0));
    EXPECT_EQ(wcs().size(), 2u);  // the NAK's and the flushed read's
}

TEST_F(RcCompleterTest, ReadDataOfTheWrongLengthIsLost) {
    std::vector<char> dst(64, 0);
    post_read(1, dst.data(), 64);
    answer(Op::kReadResp, 1, 32);
    expect_fatal("protocol error: read answer does not match the request");
    // what the queue pair does then: everything outstanding flushes
    {
        std::lock_guard lk(sq_mu_);
        completer_.lost();
    }
    EXPECT_EQ(statuses(), Statuses{IBV_WC_WR_FLUSH_ERR});
}

TEST_F(RcCompleterTest, ReadDataForAWriteIsLost) {
    post(Op::kWrite, 1);
    answer(Op::kReadResp, 1, 16);
    expect_fatal("protocol error: read answer does not match the request");
}

TEST_F(RcCompleterTest, AnAckThatSkipsAReadsDataIsLost) {
    std::vector<char> dst(8);
    post_read(1, dst.data(), 8);
    answer(Op::kAck, 1);
    expect_fatal("protocol error: a read acknowledged without its data");
}

TEST_F(RcCompleterTest, AnAnswerOutOfOrderIsLost) {
    post(Op::kWrite, 1);
    post(Op::kWrite, 2);
    post(Op::kWrite, 3);
    answer(Op::kAck, 2);
    answer(Op::kNak, 1, 0, static_cast<uint16_t>(NakStatus::kAccess));  // 1 is done already
    expect_fatal("protocol error: answer out of order");
    EXPECT_EQ(wcs().size(), 2u);
}

// Frames no answer may be: each ends the connection before it completes anything.
TEST_F(RcCompleterTest, MalformedAnswersAreLost) {
    struct Case {
        Op op;
        uint64_t seq;
        uint32_t length;
        const char *why;
    };
    const Case cases[] = {
        {Op::kAck, 7, 0, "protocol error: answer for a request never sent"},
        {Op::kAck, 0, 0, "protocol error: answer for a request never sent"},
        {Op::kReadResp, 1, kMaxOpLength + 1, "protocol error: answer for a request never sent"},
        {Op::kWrite, 0, 0, "protocol error: unexpected opcode on the answer stream"},
    };
    post(Op::kWrite, 1);
    for (const Case &c : cases) {
        SCOPED_TRACE(c.why);
        Completer fresh(sq_, sq_mu_, Completer::Target{&cq_, kQpNum, &remote_qp_}, host_);
        FrameHeader h{};
        h.op = static_cast<uint8_t>(c.op);
        h.length = c.length;
        h.aux = c.seq;
        bytes(&h, sizeof(h));
        EXPECT_EQ(fresh.read(input_.io, input_.disc), Step::kFatal);
        ASSERT_NE(fresh.end().why, nullptr);
        EXPECT_STREQ(fresh.end().why, c.why);
        EXPECT_TRUE(fresh.end().protocol);
        EXPECT_TRUE(wcs().empty());
    }
}

TEST_F(RcCompleterTest, TheDisconnectEndsTheInput) {
    post(Op::kWrite, 1);
    post(Op::kWrite, 2);
    answer(Op::kAck, 1);
    answer(Op::kDisconnect, 0);
    answer(Op::kAck, 2);  // never read: nothing follows a Disconnect
    EXPECT_EQ(read(), Step::kStop);
    EXPECT_TRUE(input_.disc);
    auto got = wcs();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].wr_id, 1u);
    EXPECT_EQ(read(), Step::kStop);
    EXPECT_TRUE(wcs().empty());
    EXPECT_FALSE(in_error());  // the queue pair flushes once both streams ended
}

TEST_F(RcCompleterTest, TheStreamsEndIsItsCause) {
    post(Op::kWrite, 1);
    input_.io.shutdown(SHUT_RDWR);
    EXPECT_EQ(read(), Step::kFatal);
    ASSERT_NE(completer_.end().why, nullptr);
    EXPECT_FALSE(completer_.end().protocol);
    EXPECT_TRUE(completer_.end().peer_end);
}

// The source was deregistered before the frame left: the request was sent as an empty write,
// and its ACK completes it with the NIC's local protection error, the rest flushed.
TEST_F(RcCompleterTest, ASourceFaultCompletesWithLocalProtectionError) {
    post(Op::kWrite, 1);
    post(Op::kWrite, 2);
    post(Op::kWrite, 3);
    host_.faults = {2};
    answer(Op::kAck, 3);
    EXPECT_EQ(read(), Step::kBlock);
    auto got = wcs();
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[1].wr_id, 2u);
    EXPECT_EQ(got[1].status, IBV_WC_LOC_PROT_ERR);
    EXPECT_EQ(got[2].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_TRUE(in_error());
    EXPECT_EQ(host_.receive_flushes, 1);
}

TEST_F(RcCompleterTest, ALocalErrorCompletesWithLocalProtectionError) {
    Wqe w;
    w.wr_id = 4;
    w.op = Op::kWrite;
    w.signaled = true;
    w.local_error = true;
    {
        std::lock_guard lk(sq_mu_);
        sq_.post(std::move(w));
    }
    answer(Op::kAck, 1);
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(statuses(), Statuses{IBV_WC_LOC_PROT_ERR});
    EXPECT_TRUE(in_error());
}

// A message half sent from a deregistered region ended the connection: it fails first.
TEST_F(RcCompleterTest, ALostConnectionFailsAFaultedMessageFirst) {
    post(Op::kSend, 1);
    post(Op::kWrite, 2);
    host_.faults = {1};
    {
        std::lock_guard lk(sq_mu_);
        completer_.lost();
    }
    EXPECT_EQ(statuses(), (Statuses{IBV_WC_LOC_PROT_ERR, IBV_WC_WR_FLUSH_ERR}));
}

// The peer's acknowledgement on its request completes ours before that request runs; one that
// covers a read whose data is still on the other stream holds the responder until it comes.
TEST_F(RcCompleterTest, APiggybackedAckWaitsForAReadsData) {
    std::vector<char> dst(8, 0);
    post(Op::kWrite, 1);
    post_read(2, dst.data(), 8);
    post(Op::kWrite, 3);
    EXPECT_EQ(completer_.apply_peer_ack(1), Step::kContinue);
    auto got = wcs();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].wr_id, 1u);
    EXPECT_EQ(completer_.apply_peer_ack(3), Step::kStall);
    EXPECT_TRUE(wcs().empty());
    EXPECT_EQ(host_.resumes, 0);
    answer(Op::kReadResp, 2, 8);
    bytes("12345678", 8);
    EXPECT_EQ(read(), Step::kBlock);
    got = wcs();
    ASSERT_EQ(got.size(), 2u);  // the read, then what the ACK covered behind it
    EXPECT_EQ(got[0].wr_id, 2u);
    EXPECT_EQ(got[1].wr_id, 3u);
    EXPECT_EQ(host_.resumes, 1);
    EXPECT_EQ(completer_.apply_peer_ack(3), Step::kContinue);  // the retried request
}

TEST_F(RcCompleterTest, TheErrorStateReleasesAWaitingResponder) {
    post_read(1, nullptr, 8);
    EXPECT_EQ(completer_.apply_peer_ack(1), Step::kStall);
    answer(Op::kNak, 1, 0, static_cast<uint16_t>(NakStatus::kAccess));
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(host_.resumes, 1);
    EXPECT_EQ(completer_.apply_peer_ack(1), Step::kContinue);  // nothing left to order after
}

TEST_F(RcCompleterTest, APiggybackedAckForARequestNeverSentIsFatal) {
    post(Op::kWrite, 1);
    EXPECT_EQ(completer_.apply_peer_ack(2), Step::kFatal);
    EXPECT_TRUE(wcs().empty());
}

TEST_F(RcCompleterTest, APostInTheErrorStateIsFlushedAtOnce) {
    {
        std::lock_guard lk(sq_mu_);
        completer_.flush_post(12, Op::kRead, false);
    }
    auto got = wcs();
    ASSERT_EQ(got.size(), 1u);  // unsignaled too: an error completion always comes
    EXPECT_EQ(got[0].wr_id, 12u);
    EXPECT_EQ(got[0].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(got[0].opcode, IBV_WC_RDMA_READ);
}

TEST_F(RcCompleterTest, AClosedQueuePairCompletesNothing) {
    post(Op::kWrite, 1);
    {
        std::lock_guard lk(sq_mu_);
        completer_.abandon();
        EXPECT_TRUE(sq_.empty());
    }
    EXPECT_TRUE(in_error());
    answer(Op::kAck, 1);
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_TRUE(wcs().empty());
}

// The ring reuses its slots: more requests than it holds, completed in turns.
TEST_F(RcCompleterTest, TheRingWrapsAround) {
    uint64_t seq = 0;
    for (uint64_t round = 0; round < 3; ++round) {
        for (uint32_t i = 0; i < kSqSize; ++i) seq = post(Op::kWrite, seq + 1);
        answer(Op::kAck, seq);
        EXPECT_EQ(read(), Step::kBlock);
        auto got = wcs();
        ASSERT_EQ(got.size(), kSqSize);
        for (uint32_t i = 0; i < kSqSize; ++i) EXPECT_EQ(got[i].wr_id, seq - kSqSize + 1 + i);
    }
}

// It grows with requests in flight across its wrap point, keeping their order.
TEST_F(RcCompleterTest, TheRingGrowsWithRequestsInFlight) {
    for (uint64_t id = 1; id <= 10; ++id) post(Op::kWrite, id);
    answer(Op::kAck, 6);
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(wcs().size(), 6u);
    for (uint64_t id = 11; id <= 40; ++id) post(Op::kWrite, id);
    answer(Op::kAck, 40);
    EXPECT_EQ(read(), Step::kBlock);
    auto got = wcs();
    ASSERT_EQ(got.size(), 34u);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].wr_id, 7 + i);
}

}  // namespace
}  // namespace rpma::rc
