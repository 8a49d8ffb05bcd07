// The requester alone (rc/requester.h): posts become send queue entries and the frames that
// carry them; a real Completer, fed crafted ACKs over MemStream, shows how they complete. No
// queue pair, no engine, no peer.
#include <gtest/gtest.h>
#include <librpma.h>

#include <mutex>
#include <optional>
#include <vector>

#include "../support/frame_input.h"
#include "common/ranked_mutex.h"
#include "provider/rc/completer.h"
#include "provider/rc/opcode.h"
#include "provider/rc/requester.h"
#include "provider/rc/send_queue.h"
#include "provider/soft/compl_channel.h"
#include "provider/soft/cq.h"

namespace rpma::rc {
namespace {

class RcRequesterTest : public ::testing::Test, public Completer::Host {
  protected:
    static constexpr uint32_t kSqSize = 8;

    // Completer::Host: the marks are the requester's (the queue pair takes the tx lock).
    bool source_faulted(uint64_t seq) override {
        return requester_.has_faults() && requester_.take_fault(seq);
    }
    void flush_receives() override {}
    void resume_responder() override {}

    int post(prov::SendWr wr, bool open = true, uint64_t ack = 0) {
        std::lock_guard lk(sq_mu_);
        std::optional<TxItem> frame;
        int ret = requester_.post(std::move(wr), open, ack, frame);
        if (frame) sent_.push_back(std::move(*frame));  // the queue pair queues it in order
        return ret;
    }
    // A request on buf_.
    prov::SendWr request(prov::WrOp op, uint64_t wr_id, uint32_t len, bool signaled = true) {
        prov::SendWr wr;
        wr.op = op;
        wr.wr_id = wr_id;
        wr.signaled = signaled;
        wr.local = buf_;
        wr.len = len;
        return wr;
    }
    int post_write(uint64_t wr_id, bool signaled, uint32_t len = 16) {
        return post(request(prov::WrOp::kWrite, wr_id, len, signaled));
    }
    // The peer's ACK up to seq, read by the completer.
    void ack(uint64_t seq) {
        FrameHeader h{};
        h.op = static_cast<uint8_t>(Op::kAck);
        h.aux = seq;
        input_.bytes(&h, sizeof(h));
        EXPECT_EQ(input_.read(completer_), Step::kBlock);
    }
    std::vector<ibv_wc_status> statuses() {
        std::vector<ibv_wc_status> out;
        for (const ibv_wc &wc : memio::take_wcs(cq_)) out.push_back(wc.status);
        return out;
    }
    using Statuses = std::vector<ibv_wc_status>;
    static bool asks_ack(const TxItem &it) { return (it.hdr.flags & kAckRequested) != 0; }
    static bool empty_write(const TxItem &it) {
        return it.hdr.op == static_cast<uint8_t>(Op::kWrite) && it.hdr.length == 0 && it.len == 0 &&
               it.data == nullptr && it.hdr.flags == kAckRequested;
    }

    char buf_[64] = {};
    ComplChannel channel_;
    Cq cq_{&channel_, false};
    RankedMutex sq_mu_{1};
    SendQueue sq_;
    uint32_t remote_qp_ = 77;
    Completer completer_{sq_, sq_mu_, Completer::Target{&cq_, 5, &remote_qp_}, *this};
    Requester requester_{sq_, completer_, kSqSize};
    std::vector<TxItem> sent_;
    memio::FrameInput input_;
};

TEST_F(RcRequesterTest, APostBecomesAFrameInSequenceOrder) {
    prov::SendWr wr = request(prov::WrOp::kSendImm, 9, 24);
    wr.imm = 0xabcd;
    EXPECT_EQ(post(wr, true, 41), 0);
    EXPECT_EQ(post_write(10, true), 0);
    ASSERT_EQ(sent_.size(), 2u);
    EXPECT_EQ(sent_[0].hdr.op, static_cast<uint8_t>(Op::kSendImm));
    EXPECT_EQ(sent_[0].hdr.imm, 0xabcdu);
    EXPECT_EQ(sent_[0].hdr.length, 24u);
    EXPECT_EQ(sent_[0].hdr.ack, 41u);  // what we executed of the peer's rides along
    EXPECT_EQ(sent_[0].data, buf_);
    EXPECT_EQ(sent_[0].len, 24u);
    EXPECT_EQ(sent_[1].seq, sent_[0].seq + 1);
    ack(sent_[1].seq);
    EXPECT_EQ(statuses(), (Statuses{IBV_WC_SUCCESS, IBV_WC_SUCCESS}));
}

TEST_F(RcRequesterTest, AReadCarriesNoPayload) {
    EXPECT_EQ(post(request(prov::WrOp::kRead, 1, 32)), 0);
    ASSERT_EQ(sent_.size(), 1u);
    EXPECT_EQ(sent_[0].hdr.op, static_cast<uint8_t>(Op::kRead));
    EXPECT_EQ(sent_[0].hdr.length, 32u);
    EXPECT_EQ(sent_[0].data, nullptr);
    EXPECT_EQ(sent_[0].len, 0u);
}

TEST_F(RcRequesterTest, AFullSendQueueRefusesThePost) {
    for (uint64_t i = 0; i < kSqSize; ++i) EXPECT_EQ(post_write(i, true), 0);
    EXPECT_EQ(post_write(99, true), RPMA_E_PROVIDER);
    EXPECT_EQ(sent_.size(), size_t{kSqSize});
    ack(sent_.back().seq);
    EXPECT_EQ(statuses().size(), size_t{kSqSize});
    EXPECT_EQ(post_write(100, true), 0);  // room again
}

TEST_F(RcRequesterTest, UnsignaledSlotsStayTakenUntilASignaledOneCompletes) {
    for (uint64_t i = 0; i < kSqSize; ++i) EXPECT_EQ(post_write(i, false), 0);
    ack(sent_.back().seq);
    EXPECT_EQ(statuses(), Statuses{});
    EXPECT_EQ(post_write(99, true), RPMA_E_PROVIDER);  // done, but not reclaimed
}

TEST_F(RcRequesterTest, UnsignaledPostsAskForAnAckEverySqSizeHalf) {
    for (uint64_t i = 0; i < kSqSize - 1; ++i) EXPECT_EQ(post_write(i, false), 0);
    ASSERT_EQ(sent_.size(), size_t{kSqSize - 1});
    for (size_t i = 0; i < sent_.size(); ++i)
        EXPECT_EQ(asks_ack(sent_[i]), i + 1 == kSqSize / 2) << "post " << i;
}

TEST_F(RcRequesterTest, ASignaledPostAsksForAnAckAndRestartsTheRun) {
    EXPECT_EQ(post_write(1, false), 0);
    EXPECT_EQ(post_write(2, false), 0);
    EXPECT_EQ(post_write(3, true), 0);
    for (uint64_t i = 4; i < 8; ++i) EXPECT_EQ(post_write(i, false), 0);
    ASSERT_EQ(sent_.size(), 7u);
    EXPECT_FALSE(asks_ack(sent_[0]));
    EXPECT_FALSE(asks_ack(sent_[1]));
    EXPECT_TRUE(asks_ack(sent_[2]));
    EXPECT_FALSE(asks_ack(sent_[3]));
    EXPECT_FALSE(asks_ack(sent_[5]));
    EXPECT_TRUE(asks_ack(sent_[6]));  // the fourth unsignaled since the signaled one
}

TEST_F(RcRequesterTest, ALocalFaultIsAnEmptyWriteThatCompletesWithLocalProtectionError) {
    EXPECT_EQ(post_write(1, true), 0);
    prov::SendWr wr = request(prov::WrOp::kSend, 2, 16);
    wr.local_fault = true;
    EXPECT_EQ(post(wr), 0);
    EXPECT_EQ(post_write(3, true), 0);
    ASSERT_EQ(sent_.size(), 3u);
    EXPECT_TRUE(empty_write(sent_[1]));
    EXPECT_EQ(sent_[1].seq, sent_[0].seq + 1);
    ack(sent_[2].seq);
    // as verbs: the error completion puts the queue pair in the error state; the rest flush
    EXPECT_EQ(statuses(), (Statuses{IBV_WC_SUCCESS, IBV_WC_LOC_PROT_ERR, IBV_WC_WR_FLUSH_ERR}));
}

TEST_F(RcRequesterTest, APostOnAClosedConnectionIsFlushed) {
    prov::SendWr wr;
    wr.wr_id = 4;
    EXPECT_EQ(post(wr, false), 0);
    EXPECT_TRUE(sent_.empty());
    EXPECT_EQ(statuses(), Statuses{IBV_WC_WR_FLUSH_ERR});
}

TEST_F(RcRequesterTest, ASourceDeregisteredBeforeTheFrameBeganBecomesAnEmptyWrite) {
    EXPECT_EQ(post_write(1, true), 0);
    EXPECT_EQ(post_write(2, true), 0);
    EXPECT_FALSE(requester_.has_faults());
    EXPECT_EQ(requester_.source_vanished(sent_[0], false, nullptr), nullptr);
    EXPECT_TRUE(empty_write(sent_[0]));
    EXPECT_TRUE(requester_.has_faults());
    ack(sent_[1].seq);
    EXPECT_EQ(statuses(), (Statuses{IBV_WC_LOC_PROT_ERR, IBV_WC_WR_FLUSH_ERR}));
    EXPECT_FALSE(requester_.has_faults());  // the completer took the mark
}

TEST_F(RcRequesterTest, ASourceDeregisteredDuringAWriteIsFinishedWithZeros) {
    EXPECT_EQ(post_write(1, true, 32), 0);
    FrameHeader before = sent_[0].hdr;
    EXPECT_EQ(requester_.source_vanished(sent_[0], true, nullptr), nullptr);
    EXPECT_TRUE(sent_[0].zero_fill);
    EXPECT_EQ(sent_[0].data, nullptr);
    EXPECT_EQ(sent_[0].hdr.length, before.length);  // the frame's length was promised
    EXPECT_EQ(sent_[0].hdr.op, before.op);
    ack(sent_[0].seq);
    EXPECT_EQ(statuses(), Statuses{IBV_WC_LOC_PROT_ERR});
}

TEST_F(RcRequesterTest, ASourceDeregisteredMidMessageEndsTheStream) {
    EXPECT_EQ(post(request(prov::WrOp::kSend, 1, 48)), 0);
    const char *why = requester_.source_vanished(sent_[0], true, nullptr);
    ASSERT_NE(why, nullptr);
    EXPECT_STREQ(why, "a region was deregistered under a message in progress");
    EXPECT_TRUE(requester_.take_fault(sent_[0].seq));  // it still completes as a local fault
    // Found again once the stream is down: the reason stands and no second mark is made.
    EXPECT_EQ(requester_.source_vanished(sent_[0], true, why), why);
    EXPECT_FALSE(requester_.has_faults());
}

TEST_F(RcRequesterTest, AMarkIsTakenOnce) {
    EXPECT_EQ(post_write(1, true), 0);
    EXPECT_EQ(requester_.source_vanished(sent_[0], false, nullptr), nullptr);
    EXPECT_FALSE(requester_.take_fault(sent_[0].seq + 1));
    EXPECT_TRUE(requester_.take_fault(sent_[0].seq));
    EXPECT_FALSE(requester_.take_fault(sent_[0].seq));
}

}  // namespace
}  // namespace rpma::rc
