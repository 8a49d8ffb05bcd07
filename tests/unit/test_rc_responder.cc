// The responder alone (rc/responder.h): crafted requests go into an in-memory stream, and what
// it does shows in registered memory, the receive CQ and a fake Host: the answers it queues,
// the error state, its stalls (RNR, answers full, the completer's wait). No queue pair, no
// engine, no peer.
#include <gtest/gtest.h>
#include <librpma.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "../support/frame_input.h"
#include "provider/rc/opcode.h"
#include "provider/rc/qp_internal.h"
#include "provider/rc/responder.h"
#include "provider/soft/compl_channel.h"
#include "provider/soft/cq.h"
#include "provider/soft/mr_table.h"
#include "provider/soft/persist.h"

namespace rpma::rc {
namespace {

// What the queue pair would do, recorded; each answer a step the test sets.
class FakeHost final : public Responder::Host {
  public:
    struct Answer {
        FrameHeader h;
        const char *data;
        std::shared_ptr<Region> region;
        bool batch;
    };
    Step note_peer_ack(uint64_t ack) override {
        acks.push_back(ack);
        return ack_step;
    }
    Step wait_for_answers(bool modifies) override {
        last_modifies = modifies;
        return answers_step;
    }
    bool answer_now() override {
        ++answer_nows;
        return true;
    }
    bool queue_answer(const FrameHeader &h, const char *data, std::shared_ptr<Region> region,
                      bool batch) override {
        responder->answered(h.aux);  // as the queue pair, under the answer stream's lock
        answers.push_back({h, data, std::move(region), batch});
        return true;
    }
    bool take_queued_nak() override { return std::exchange(queued_nak, false); }
    std::optional<prov::RecvWr> take_recv() override {
        if (recvs.empty()) {
            ++rnr;
            return std::nullopt;
        }
        prov::RecvWr r = recvs.front();
        recvs.pop_front();
        return r;
    }
    void enter_error(const prov::RecvWr *failed, ibv_wc_status st) override {
        if (failed) responder->push_recv_wc(*failed, st, IBV_WC_RECV, 0, false, 0);
        ++errors;
    }

    Responder *responder = nullptr;
    Step ack_step = Step::kContinue;
    Step answers_step = Step::kContinue;
    bool queued_nak = false;
    bool last_modifies = false;
    std::deque<prov::RecvWr> recvs;
    std::vector<uint64_t> acks;
    std::vector<Answer> answers;
    int answer_nows = 0;
    int rnr = 0;
    int errors = 0;
};

class RcResponderTest : public ::testing::Test {
  protected:
    static constexpr uint32_t kQpNum = 5;
    static constexpr int kAllUsage =
        RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC |
        RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
        RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV;

    RcResponderTest() : responder_(&mrs_, Responder::Target{&cq_, kQpNum, &remote_qp_}, host_) {
        host_.responder = &responder_;
        mem_ = static_cast<char *>(
            mmap(nullptr, kMem, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        region_ = mrs_.add(mem_, kMem, kAllUsage);
    }
    ~RcResponderTest() override { munmap(mem_, kMem); }

    // One request frame from the peer's requester, and a payload's bytes.
    void request(Op op, uint32_t length, uint64_t addr, uint32_t rkey, uint8_t flags = 0,
                 uint64_t aux = 0, uint64_t ack = 0) {
        FrameHeader h{};
        h.op = static_cast<uint8_t>(op);
        h.flags = flags;
        h.length = length;
        h.addr = addr;
        h.rkey = rkey;
        h.aux = aux;
        h.ack = ack;
        bytes(&h, sizeof(h));
    }
    void write(uint32_t off, const char *text, uint8_t flags = kAckRequested) {
        auto n = static_cast<uint32_t>(std::strlen(text));
        request(Op::kWrite, n, addr(off), region_->rkey(), flags);
        bytes(text, n);
    }
    void bytes(const void *p, size_t n) { input_.bytes(p, n); }
    uint64_t addr(uint32_t off) const { return reinterpret_cast<uintptr_t>(mem_ + off); }
    prov::RecvWr recv(uint64_t id, uint32_t off, uint32_t len, bool usable = true) {
        return prov::RecvWr{region_, mem_ + off, len, id, usable};
    }
    Step read() { return input_.read(responder_); }
    std::vector<ibv_wc> wcs() { return memio::take_wcs(cq_); }
    void expect_nak(NakStatus st, uint64_t seq) {
        ASSERT_EQ(host_.answers.size(), 1u);
        const FrameHeader &h = host_.answers[0].h;
        EXPECT_EQ(h.op, static_cast<uint8_t>(Op::kNak));
        EXPECT_EQ(h.status, static_cast<uint16_t>(st));
        EXPECT_EQ(h.aux, seq);
        EXPECT_FALSE(host_.answers[0].batch);  // a NAK goes out at once
        EXPECT_TRUE(responder_.error());
        EXPECT_GE(host_.errors, 1);
    }
    void expect_fatal(const char *why) {
        EXPECT_EQ(read(), Step::kFatal);
        ASSERT_NE(responder_.end().why, nullptr);
        EXPECT_STREQ(responder_.end().why, why);
        EXPECT_TRUE(responder_.end().protocol);
    }

    static constexpr size_t kMem = 2 * 4096;
    MrTable mrs_;
    char *mem_;
    std::shared_ptr<Region> region_;
    ComplChannel channel_;
    Cq cq_{&channel_, false};
    uint32_t remote_qp_ = 77;
    FakeHost host_;
    Responder responder_;
    memio::FrameInput input_;
};

TEST_F(RcResponderTest, AWriteIsPlacedExecutedAndOwesItsAck) {
    write(8, "hello");
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(std::memcmp(mem_ + 8, "hello", 5), 0);
    EXPECT_EQ(responder_.executed(), 1u);
    EXPECT_TRUE(host_.answers.empty());  // a write's answer is an ACK, which the host sends
    EXPECT_TRUE(responder_.ack_owed());
    EXPECT_EQ(responder_.unacked(), 1u);
    EXPECT_EQ(responder_.take_ack(), 1u);
    EXPECT_FALSE(responder_.ack_owed());
    EXPECT_EQ(responder_.unacked(), 0u);
    EXPECT_TRUE(host_.last_modifies);
    EXPECT_GE(host_.answer_nows, 1);  // before its read: answers never wait across one
}

TEST_F(RcResponderTest, AnUnsignaledWriteOwesNoAckButIsUnacknowledged) {
    write(0, "abc", 0);
    write(3, "def", 0);
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(responder_.executed(), 2u);
    EXPECT_FALSE(responder_.ack_owed());
    EXPECT_EQ(responder_.unacked(), 2u);
    EXPECT_EQ(responder_.unacked(1), 1u);  // a close's limit
    responder_.answered(2);
    EXPECT_EQ(responder_.unacked(), 0u);
}

TEST_F(RcResponderTest, ABadRkeyIsNakedAsAnAccessErrorAndTouchesNothing) {
    request(Op::kWrite, 5, addr(0), region_->rkey() + 1, kAckRequested);
    bytes("hello", 5);
    write(16, "later");  // in the error state: dropped
    EXPECT_EQ(read(), Step::kBlock);
    expect_nak(NakStatus::kAccess, 1);
    EXPECT_EQ(mem_[0], 0);
    EXPECT_EQ(mem_[16], 0);
    EXPECT_EQ(responder_.executed(), 0u);
    EXPECT_EQ(responder_.unacked(), 0u);  // the error state acknowledges nothing
}

TEST_F(RcResponderTest, ARangeOutsideTheRegionIsAnAccessError) {
    request(Op::kRead, 16, addr(kMem - 8), region_->rkey());
    EXPECT_EQ(read(), Step::kBlock);
    expect_nak(NakStatus::kAccess, 1);
}

TEST_F(RcResponderTest, AMissingUsageIsAnAccessError) {
    auto ro = mrs_.add(mem_, kMem, RPMA_MR_USAGE_READ_SRC);
    request(Op::kWrite, 4, addr(0), ro->rkey());
    bytes("abcd", 4);
    EXPECT_EQ(read(), Step::kBlock);
    expect_nak(NakStatus::kAccess, 1);
    EXPECT_EQ(mem_[0], 0);
}

// Remote access as upstream registers it: a flush usage of either type gives remote reads,
// since a flush is carried out as one; only WRITE_DST gives remote writes.
TEST_F(RcResponderTest, AnyFlushUsageAllowsReadsAndFlushesOfEitherType) {
    for (int usage : {RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT,
                      RPMA_MR_USAGE_READ_SRC}) {
        auto r = mrs_.add(mem_, kMem, usage);
        request(Op::kRead, 4, addr(0), r->rkey());
        request(Op::kFlush, 8, addr(0), r->rkey(), kAckRequested);
        request(Op::kFlush, 8, addr(0), r->rkey(), kFlushPersistent | kAckRequested);
    }
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_FALSE(responder_.error());
    EXPECT_EQ(responder_.executed(), 9u);
}

TEST_F(RcResponderTest, ReadingARegionWithoutReadOrFlushUsageIsAnAccessError) {
    auto wo = mrs_.add(mem_, kMem, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_DST);
    request(Op::kRead, 4, addr(0), wo->rkey());
    EXPECT_EQ(read(), Step::kBlock);
    expect_nak(NakStatus::kAccess, 1);
}

TEST_F(RcResponderTest, AMisalignedAtomicWriteIsAnInvalidRequest) {
    request(Op::kAtomicWrite, 8, addr(4), region_->rkey(), kAckRequested, 42);
    EXPECT_EQ(read(), Step::kBlock);
    expect_nak(NakStatus::kInvalidRequest, 1);
}

TEST_F(RcResponderTest, AnAtomicWriteStoresItsValue) {
    request(Op::kAtomicWrite, 8, addr(64), region_->rkey(), kAckRequested, 0x1122334455667788);
    EXPECT_EQ(read(), Step::kBlock);
    uint64_t v;
    std::memcpy(&v, mem_ + 64, 8);
    EXPECT_EQ(v, 0x1122334455667788u);
    EXPECT_EQ(responder_.executed(), 1u);
    EXPECT_TRUE(responder_.ack_owed());
}

TEST_F(RcResponderTest, APersistentFlushSyncsTheRange) {
    PersistStats before = persist_stats();
    request(Op::kFlush, 64, addr(4096), region_->rkey(), kFlushPersistent | kAckRequested);
    EXPECT_EQ(read(), Step::kBlock);
    PersistStats after = persist_stats();
    EXPECT_EQ(after.calls, before.calls + 1);
    EXPECT_EQ(responder_.executed(), 1u);
    EXPECT_TRUE(responder_.ack_owed());
    EXPECT_FALSE(host_.last_modifies);  // a flush changes nothing a read answer holds
}

// As upstream librpma carries a flush out: an 8-byte read at its offset, whatever its length.
TEST_F(RcResponderTest, AFlushIsCheckedAsAnEightByteReadAtItsOffset) {
    request(Op::kFlush, 0, addr(kMem - 8), region_->rkey(), kAckRequested);
    request(Op::kFlush, 2 * kMem, addr(0), region_->rkey(), kAckRequested);
    request(Op::kFlush, 64, addr(kMem - 16), region_->rkey(), kAckRequested);
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_TRUE(host_.answers.empty());
    EXPECT_EQ(responder_.executed(), 3u);
    EXPECT_FALSE(responder_.error());
}

TEST_F(RcResponderTest, AFlushWhoseEightBytesLeaveTheRegionIsAnAccessError) {
    request(Op::kFlush, 1, addr(kMem - 1), region_->rkey(), kAckRequested);
    EXPECT_EQ(read(), Step::kBlock);
    expect_nak(NakStatus::kAccess, 1);
}

TEST_F(RcResponderTest, AZeroLengthFlushAfterTheRegionIsAnAccessError) {
    request(Op::kFlush, 0, addr(kMem), region_->rkey(), kAckRequested);
    EXPECT_EQ(read(), Step::kBlock);
    expect_nak(NakStatus::kAccess, 1);
}

TEST_F(RcResponderTest, APersistentFlushPastTheRegionSyncsTheRegionsPagesOnly) {
    request(Op::kFlush, 4 * kMem, addr(4096), region_->rkey(), kFlushPersistent | kAckRequested);
    EXPECT_EQ(read(), Step::kBlock);
    PersistStats after = persist_stats();
    EXPECT_EQ(after.last_begin, addr(4096));
    EXPECT_EQ(after.last_end, addr(kMem));
    EXPECT_EQ(responder_.executed(), 1u);
}

// rpma_flush takes a size_t: a longer flush than the frame's field (kFlushToEnd) covers the rest
// of the region, which may be larger than that field too.
TEST_F(RcResponderTest, AFlushToTheEndCoversARegionOverFourGiB) {
    constexpr uint64_t kBig = (uint64_t{8} << 30) + 4096;
    void *p = mmap(nullptr, kBig, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) GTEST_SKIP() << "no 8 GiB of address space here (overcommit off?)";
    auto base = reinterpret_cast<uintptr_t>(p);
    auto r = mrs_.add(static_cast<char *>(p), kBig, kAllUsage);
    PersistStats before = persist_stats();
    request(Op::kFlush, prov::kFlushToEnd - 1, base + 4096, r->rkey(),
            kFlushPersistent | kAckRequested);
    request(Op::kFlush, prov::kFlushToEnd, base + 4096, r->rkey(),
            kFlushPersistent | kAckRequested);
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(responder_.executed(), 2u);
    PersistStats after = persist_stats();
    EXPECT_EQ(after.last_begin, base + 4096);
    EXPECT_EQ(after.last_end, base + kBig);
    // the first, page-rounded: 4 GiB; the second: the rest of the region
    EXPECT_EQ(after.bytes - before.bytes, (uint64_t{4} << 30) + kBig - 4096);
    munmap(p, kBig);
}

TEST_F(RcResponderTest, AFlushThatCannotPersistIsAnOperationError) {
    // a registered range no longer mapped: msync fails
    char *gone = static_cast<char *>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(gone, MAP_FAILED);
    munmap(gone, 4096);
    auto r = mrs_.add(gone, 4096, kAllUsage);
    request(Op::kFlush, 64, reinterpret_cast<uintptr_t>(gone), r->rkey(),
            kFlushPersistent | kAckRequested);
    EXPECT_EQ(read(), Step::kBlock);
    expect_nak(NakStatus::kOperation, 1);
}

TEST_F(RcResponderTest, AReadIsAnsweredFromTheRegionInBatches) {
    std::memcpy(mem_ + 32, "data", 4);
    write(0, "w", 0);
    request(Op::kRead, 4, addr(32), region_->rkey());
    EXPECT_EQ(read(), Step::kBlock);
    ASSERT_EQ(host_.answers.size(), 1u);
    const FakeHost::Answer &a = host_.answers[0];
    EXPECT_EQ(a.h.op, static_cast<uint8_t>(Op::kReadResp));
    EXPECT_EQ(a.h.aux, 2u);
    EXPECT_EQ(a.h.length, 4u);
    EXPECT_EQ(a.data, mem_ + 32);  // gathered from the region, no copy
    EXPECT_EQ(a.region, region_);
    EXPECT_TRUE(a.batch);
    EXPECT_EQ(responder_.executed(), 2u);
    EXPECT_EQ(responder_.unacked(), 0u);  // the answer acknowledges it and the write before
    EXPECT_FALSE(host_.last_modifies);
}

TEST_F(RcResponderTest, AReadAnswerTurnedNakPutsTheResponderInTheErrorState) {
    host_.queued_nak = true;
    write(0, "abc");
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_TRUE(responder_.error());
    EXPECT_EQ(host_.errors, 1);
    EXPECT_EQ(mem_[0], 0);                         // dropped
    EXPECT_FALSE(responder_.absorb_queued_nak());  // once
}

TEST_F(RcResponderTest, ASendWaitsForAReceiveThenDelivers) {
    request(Op::kSendImm, 5, 0, 0, kAckRequested);
    bytes("hello", 5);
    EXPECT_EQ(read(), Step::kStall);  // RNR
    EXPECT_EQ(host_.rnr, 1);
    EXPECT_EQ(responder_.executed(), 0u);
    EXPECT_EQ(read(), Step::kStall);  // the header stayed staged: the same request, again
    EXPECT_EQ(host_.rnr, 2);
    host_.recvs.push_back(recv(9, 100, 64));
    EXPECT_EQ(read(), Step::kBlock);  // resumed
    EXPECT_EQ(std::memcmp(mem_ + 100, "hello", 5), 0);
    EXPECT_EQ(responder_.executed(), 1u);
    auto got = wcs();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].wr_id, 9u);
    EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[0].opcode, IBV_WC_RECV);
    EXPECT_EQ(got[0].byte_len, 5u);
    EXPECT_EQ(got[0].wc_flags, IBV_WC_WITH_IMM);
    EXPECT_EQ(got[0].qp_num, kQpNum);
    EXPECT_EQ(got[0].src_qp, remote_qp_);
}

TEST_F(RcResponderTest, AWriteWithImmediateTakesAReceive) {
    host_.recvs.push_back(recv(4, 200, 0));
    request(Op::kWriteImm, 3, addr(0), region_->rkey(), kAckRequested);
    bytes("xyz", 3);
    EXPECT_EQ(read(), Step::kBlock);
    auto got = wcs();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(got[0].byte_len, 3u);
    EXPECT_EQ(std::memcmp(mem_, "xyz", 3), 0);
}

TEST_F(RcResponderTest, AMessageLongerThanTheReceiveFailsItAndIsAnInvalidRequest) {
    host_.recvs.push_back(recv(9, 0, 2));
    request(Op::kSend, 5, 0, 0);
    bytes("hello", 5);
    EXPECT_EQ(read(), Step::kBlock);
    expect_nak(NakStatus::kInvalidRequest, 1);
    auto got = wcs();
    ASSERT_EQ(got.size(), 1u);  // pushed in the error state's hold (enter_error)
    EXPECT_EQ(got[0].status, IBV_WC_LOC_LEN_ERR);
    EXPECT_EQ(mem_[0], 0);
}

TEST_F(RcResponderTest, AReceiveBufferItMayNotUseIsAnOperationError) {
    host_.recvs.push_back(recv(9, 0, 64, false));
    request(Op::kSend, 5, 0, 0);
    bytes("hello", 5);
    EXPECT_EQ(read(), Step::kBlock);
    expect_nak(NakStatus::kOperation, 1);
    auto got = wcs();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, IBV_WC_LOC_PROT_ERR);
    EXPECT_EQ(mem_[0], 0);
}

TEST_F(RcResponderTest, FullAnswersStallTheRequestUntilTheyLeave) {
    host_.answers_step = Step::kStall;
    write(0, "abc");
    EXPECT_EQ(read(), Step::kStall);
    EXPECT_EQ(responder_.executed(), 0u);
    EXPECT_EQ(mem_[0], 0);
    host_.answers_step = Step::kContinue;
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(std::memcmp(mem_, "abc", 3), 0);
}

TEST_F(RcResponderTest, AnswersThatCannotBeSentEndTheStream) {
    host_.answers_step = Step::kFatal;
    write(0, "abc");
    EXPECT_EQ(read(), Step::kFatal);
    EXPECT_EQ(mem_[0], 0);
}

TEST_F(RcResponderTest, ThePeersAckGoesFirstAndMayWaitForTheCompleter) {
    host_.ack_step = Step::kStall;  // a read it acknowledges still waits for its data
    request(Op::kWrite, 3, addr(0), region_->rkey(), kAckRequested, 0, 7);
    bytes("abc", 3);
    EXPECT_EQ(read(), Step::kStall);
    EXPECT_EQ(mem_[0], 0);
    host_.ack_step = Step::kContinue;
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(host_.acks, (std::vector<uint64_t>{7, 7}));
    EXPECT_EQ(std::memcmp(mem_, "abc", 3), 0);
}

TEST_F(RcResponderTest, AnAckOfARequestNeverSentEndsTheStream) {
    host_.ack_step = Step::kFatal;
    write(0, "abc");
    expect_fatal("protocol error: acknowledgement of a request never sent");
}

TEST_F(RcResponderTest, AnOversizedRequestEndsTheStream) {
    request(Op::kSend, kMaxOpLength + 1, 0, 0);
    expect_fatal("protocol error: oversized request");
    EXPECT_EQ(host_.rnr, 0);  // before any receive is looked for
}

TEST_F(RcResponderTest, AnAnswerOnTheRequestStreamEndsIt) {
    request(Op::kAck, 0, 0, 0);
    expect_fatal("protocol error: unexpected opcode");
}

TEST_F(RcResponderTest, TheDisconnectStopsTheStream) {
    write(0, "abc");
    request(Op::kDisconnect, 0, 0, 0);
    write(8, "def");  // never read
    EXPECT_EQ(read(), Step::kStop);
    EXPECT_TRUE(input_.disc);
    EXPECT_EQ(std::memcmp(mem_, "abc", 3), 0);
    EXPECT_EQ(mem_[8], 0);
}

TEST_F(RcResponderTest, AZeroLengthWriteNeedsNoRegion) {
    request(Op::kWrite, 0, 0, 0, kAckRequested);  // what a faulted request becomes
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(responder_.executed(), 1u);
    EXPECT_TRUE(host_.answers.empty());
}

TEST_F(RcResponderTest, AFlushedReceiveCompletesWithFlushError) {
    responder_.flush_recv(recv(3, 0, 8));
    auto got = wcs();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].wr_id, 3u);
    EXPECT_EQ(got[0].status, IBV_WC_WR_FLUSH_ERR);
}

}  // namespace
}  // namespace rpma::rc
