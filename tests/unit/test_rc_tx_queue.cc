// The frames queued on one stream (rc/tx_queue.h) over an in-memory stream: gathered in order,
// a full stream, calls of at most kSendChunk bytes, a frame whose region died, a close's pruning
// and the ACK before a Disconnect.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "../support/mem_stream.h"
#include "provider/rc/opcode.h"
#include "provider/rc/qp_internal.h"
#include "provider/rc/tx_queue.h"
#include "provider/soft/region.h"

namespace rpma::rc {
namespace {

class RcTxQueueTest : public ::testing::Test {
  protected:
    static TxItem frame(Op op, uint64_t aux = 0, uint8_t flags = 0, uint64_t seq = 0) {
        FrameHeader h{};
        h.op = static_cast<uint8_t>(op);
        h.aux = aux;
        h.flags = flags;
        return TxItem{h, nullptr, 0, nullptr, seq};
    }
    TxItem with_data(Op op, uint32_t len, uint64_t seq = 0) {
        TxItem it = frame(op, seq, 0, seq);
        it.hdr.length = len;
        it.data = mem_.data();
        it.len = len;
        it.guard = region_;
        return it;
    }
    // What went out: the frames' headers, and each payload's bytes.
    std::vector<FrameHeader> headers(std::vector<char> *payload = nullptr) {
        std::lock_guard lk(out_->mu);
        std::vector<FrameHeader> got;
        while (out_->bytes.size() >= kHeaderSize) {
            FrameHeader h;
            std::copy_n(out_->bytes.begin(), kHeaderSize, reinterpret_cast<char *>(&h));
            out_->bytes.erase(out_->bytes.begin(), out_->bytes.begin() + kHeaderSize);
            bool carries = h.op == static_cast<uint8_t>(Op::kReadResp) || is_request(h.op);
            size_t n = carries ? std::min<size_t>(h.length, out_->bytes.size()) : 0;
            if (payload)
                payload->insert(payload->end(), out_->bytes.begin(), out_->bytes.begin() + n);
            out_->bytes.erase(out_->bytes.begin(), out_->bytes.begin() + n);
            got.push_back(h);
        }
        return got;
    }
    void capacity(size_t n) {
        std::lock_guard lk(out_->mu);
        out_->capacity = n;
    }

    std::vector<char> mem_ = std::vector<char>(4096, 'm');
    std::shared_ptr<Region> region_ = std::make_shared<Region>(mem_.data(), mem_.size(), 0, 9);
    std::shared_ptr<memio::Channel> in_ = std::make_shared<memio::Channel>();
    std::shared_ptr<memio::Channel> out_ = std::make_shared<memio::Channel>();
    memio::MemStream io_{in_, out_};
    TxQueue q_;
};

TEST_F(RcTxQueueTest, FramesLeaveInOrderWithTheirPayloadFromTheRegion) {
    q_.push(frame(Op::kAck, 1));
    q_.push(with_data(Op::kReadResp, 100, 2));
    EXPECT_EQ(q_.data_items(), 1u);
    EXPECT_EQ(q_.send(io_), TxQueue::Sent::kAll);
    EXPECT_TRUE(q_.empty());
    EXPECT_EQ(q_.data_items(), 0u);
    std::vector<char> payload;
    auto got = headers(&payload);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].op, static_cast<uint8_t>(Op::kAck));
    EXPECT_EQ(got[1].aux, 2u);
    EXPECT_EQ(payload, std::vector<char>(100, 'm'));
}

TEST_F(RcTxQueueTest, AFullStreamBlocksAndTheRestLeavesLater) {
    capacity(kHeaderSize + 10);
    q_.push(with_data(Op::kReadResp, 100, 1));
    q_.push(frame(Op::kAck, 2));
    EXPECT_EQ(q_.send(io_), TxQueue::Sent::kBlocked);
    EXPECT_EQ(q_.size(), 2u);
    EXPECT_EQ(q_.data_items(), 1u);  // still points into the region
    capacity(1 << 20);
    EXPECT_EQ(q_.send(io_), TxQueue::Sent::kAll);
    EXPECT_EQ(headers().size(), 2u);
}

TEST_F(RcTxQueueTest, AFrameWhoseRegionDiedStopsTheSend) {
    q_.push(frame(Op::kAck, 1));
    q_.push(with_data(Op::kReadResp, 100, 2));
    region_->kill();
    EXPECT_EQ(q_.send(io_), TxQueue::Sent::kDead);
    EXPECT_EQ(headers().size(), 0u);  // nothing leaves until its owner has decided
    TxItem &dead = q_.dead();
    EXPECT_EQ(dead.hdr.aux, 2u);
    EXPECT_FALSE(q_.started(dead));
    // the owner turns it into a frame without data (a NAK), and the send goes on
    dead.hdr.op = static_cast<uint8_t>(Op::kNak);
    dead.hdr.length = 0;
    dead.len = 0;
    dead.data = nullptr;
    q_.drop_region(dead);
    EXPECT_EQ(q_.data_items(), 0u);
    EXPECT_EQ(q_.send(io_), TxQueue::Sent::kAll);
    auto got = headers();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].op, static_cast<uint8_t>(Op::kAck));
    EXPECT_EQ(got[1].op, static_cast<uint8_t>(Op::kNak));
}

TEST_F(RcTxQueueTest, AZeroFilledPayloadSendsZeros) {
    TxItem it = with_data(Op::kWrite, 100, 1);
    it.zero_fill = true;
    it.guard.reset();
    q_.push(std::move(it));
    EXPECT_EQ(q_.send(io_), TxQueue::Sent::kAll);
    std::vector<char> payload;
    headers(&payload);
    EXPECT_EQ(payload, std::vector<char>(100, 0));
}

TEST_F(RcTxQueueTest, ACallOffersAtMostAChunkAndLongPayloadsLeaveWholeAcrossCalls) {
    capacity(16 << 20);
    std::vector<char> big(700 * 1024);
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i % 251);
    auto region = std::make_shared<Region>(big.data(), big.size(), 0, 9);
    for (uint64_t seq = 1; seq <= 3; ++seq) {
        TxItem it = frame(Op::kReadResp, seq, 0, seq);
        it.data = big.data() + seq;  // each payload starts elsewhere: a mix-up shows
        it.len = big.size() - 3;
        it.hdr.length = static_cast<uint32_t>(it.len);
        it.guard = region;
        q_.push(std::move(it));
    }
    TxItem zeros = with_data(Op::kWrite, 0, 4);
    zeros.len = 3 * kZeroSize + 5;  // more than g_zero holds
    zeros.hdr.length = static_cast<uint32_t>(zeros.len);
    zeros.zero_fill = true;
    zeros.guard.reset();
    q_.push(std::move(zeros));
    EXPECT_EQ(q_.send(io_), TxQueue::Sent::kAll);
    EXPECT_TRUE(q_.empty());
    EXPECT_EQ(q_.data_items(), 0u);
    {
        std::lock_guard lk(out_->mu);
        EXPECT_LE(out_->largest_offer, kSendChunk);
        EXPECT_EQ(out_->bytes.size(), 4 * kHeaderSize + 3 * (big.size() - 3) + 3 * kZeroSize + 5);
    }
    std::vector<char> payload;
    auto got = headers(&payload);
    ASSERT_EQ(got.size(), 4u);
    std::vector<char> want;
    for (size_t seq = 1; seq <= 3; ++seq) {
        EXPECT_EQ(got[seq - 1].aux, seq);
        want.insert(want.end(), big.begin() + static_cast<long>(seq),
                    big.begin() + static_cast<long>(seq + big.size() - 3));
    }
    want.insert(want.end(), 3 * kZeroSize + 5, 0);
    EXPECT_TRUE(payload == want);
}

TEST_F(RcTxQueueTest, TheAnswerDueIsTheLastRequestSentThatAsksForOne) {
    q_.push(frame(Op::kWrite, 0, kAckRequested, 1));
    q_.push(frame(Op::kWrite, 0, 0, 2));
    q_.push(frame(Op::kRead, 0, 0, 3));
    q_.push(frame(Op::kWrite, 0, 0, 4));
    EXPECT_EQ(q_.answer_due(), 0u);
    EXPECT_EQ(q_.send(io_), TxQueue::Sent::kAll);
    EXPECT_EQ(q_.answer_due(), 3u);
}

TEST_F(RcTxQueueTest, ABrokenStreamReportsItsError) {
    {
        std::lock_guard lk(out_->mu);
        out_->eof = true;
    }
    q_.push(frame(Op::kAck, 1));
    TxQueue::Sent st = q_.send(io_);
    EXPECT_EQ(st, TxQueue::Sent::kError);
    EXPECT_EQ(q_.error(), EPIPE);
}

TEST_F(RcTxQueueTest, PruningSkipsTheFrameHalfSentAndTheAckGoesBeforeTheDisconnect) {
    capacity(kHeaderSize + 10);
    q_.push(with_data(Op::kReadResp, 100, 1));
    q_.push(with_data(Op::kReadResp, 100, 2));
    q_.push(frame(Op::kDisconnect));
    EXPECT_EQ(q_.send(io_), TxQueue::Sent::kBlocked);
    int asked = 0;
    q_.prune([&](TxItem &it) {
        ++asked;
        return it.hdr.op == static_cast<uint8_t>(Op::kReadResp);  // never the one begun
    });
    EXPECT_EQ(asked, 2);
    EXPECT_EQ(q_.size(), 2u);
    EXPECT_EQ(q_.data_items(), 1u);
    q_.insert_before_disconnect(frame(Op::kAck, 1));
    TxItem *last = q_.unsent_back();
    ASSERT_NE(last, nullptr);
    EXPECT_EQ(last->hdr.op, static_cast<uint8_t>(Op::kDisconnect));
    capacity(1 << 20);
    EXPECT_EQ(q_.send(io_), TxQueue::Sent::kAll);
    auto got = headers();
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[1].op, static_cast<uint8_t>(Op::kAck));
    EXPECT_EQ(got[2].op, static_cast<uint8_t>(Op::kDisconnect));
}

TEST_F(RcTxQueueTest, AnAckHalfSentIsNotRaised) {
    capacity(kHeaderSize / 2);
    q_.push(frame(Op::kAck, 1));
    EXPECT_EQ(q_.send(io_), TxQueue::Sent::kBlocked);
    EXPECT_EQ(q_.unsent_back(), nullptr);
    q_.push(frame(Op::kAck, 2));
    ASSERT_NE(q_.unsent_back(), nullptr);
    EXPECT_EQ(q_.unsent_back()->hdr.aux, 2u);
}

}  // namespace
}  // namespace rpma::rc
