// The frame reader's word on what it left in the stream (rc/frame_reader.h, drained()): the
// streams are registered edge-triggered, so a reader that stops with input left must ask for
// another event (Progress::rewatch), and one that took all there was must not.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "../support/frame_input.h"
#include "provider/rc/frame_reader.h"

namespace rpma::rc {
namespace {

// Takes every frame and drops its payload.
struct Discarder {
    FrameReader &reader;
    int frames = 0;
    Step header(const FrameHeader &h) {
        ++frames;
        reader.discard(h.length);
        return Step::kContinue;
    }
    void placed(Payload, bool, uint32_t) {}
    bool before_recv() { return true; }
};

class RcFrameReaderTest : public ::testing::Test {
  protected:
    void frame(uint32_t payload) {
        FrameHeader h{};
        h.op = static_cast<uint8_t>(Op::kWrite);
        h.length = payload;
        input_.bytes(&h, sizeof(h));
        std::vector<char> body(payload, 'p');
        input_.bytes(body.data(), body.size());
    }
    Step read() { return reader_.read(input_.io, input_.disc, handler_); }

    memio::FrameInput input_;
    FrameReader reader_;
    Discarder handler_{reader_};
};

TEST_F(RcFrameReaderTest, AReadThatTakesAllThereIsSaysDrained) {
    frame(16);
    frame(0);
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(handler_.frames, 2);
    EXPECT_TRUE(reader_.drained());  // a short read: new input brings a new edge
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_TRUE(reader_.drained());  // EAGAIN
}

// Large payloads keep every read full until the budget is spent: input is left behind, which
// no new edge would announce.
TEST_F(RcFrameReaderTest, AReadThatSpendsItsBudgetSaysInputIsLeft) {
    constexpr int kFrames = 2 * kRxBudget;
    for (int i = 0; i < kFrames; ++i) frame(kStagingSize);
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_FALSE(reader_.drained());
    EXPECT_LT(handler_.frames, kFrames);
    EXPECT_GT(input_.unread(), 0u);
    int reads = 1;
    while (!reader_.drained() && reads < 4 * kFrames) {
        EXPECT_EQ(read(), Step::kBlock);
        ++reads;
    }
    EXPECT_TRUE(reader_.drained());
    EXPECT_EQ(handler_.frames, kFrames);
    EXPECT_EQ(input_.unread(), 0u);
}

// A payload read straight into its target that gets less than it asked for took all there was.
TEST_F(RcFrameReaderTest, AShortPayloadReadSaysDrained) {
    frame(4 * kStagingSize);
    {
        std::lock_guard lk(input_.in->mu);
        input_.in->bytes.resize(input_.in->bytes.size() - 100);  // the rest is on its way
    }
    EXPECT_EQ(read(), Step::kBlock);
    EXPECT_EQ(handler_.frames, 1);
    EXPECT_EQ(input_.unread(), 0u);
    EXPECT_TRUE(reader_.drained());
}

}  // namespace
}  // namespace rpma::rc
