// The software CQ and its completion channel (src/provider/soft/cq.h): completions come out in
// push order and in batches of at most num_entries, the channel gets one event per arming, and
// rpma_cq_wait's error codes for a shared and a non-blocking channel.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <librpma.h>
#include <poll.h>

#include "provider/soft/compl_channel.h"
#include "provider/soft/cq.h"

using rpma::ComplChannel;
using rpma::Cq;

namespace {

ibv_wc Wc(uint64_t wr_id) {
    ibv_wc wc{};
    wc.wr_id = wr_id;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RDMA_WRITE;
    return wc;
}

// True if the channel's fd holds an event (without taking it).
bool Readable(const ComplChannel &ch) {
    pollfd p{ch.fd(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

TEST(SoftCq, EmptyGivesNoCompletion) {
    ComplChannel ch;
    ASSERT_TRUE(ch.valid());
    Cq cq(&ch, false);
    ibv_wc wc[4];
    int got = -7;
    EXPECT_EQ(cq.get_wc(4, wc, &got), RPMA_E_NO_COMPLETION);
    EXPECT_TRUE(cq.empty());
    EXPECT_EQ(cq.fd(), ch.fd());
}

TEST(SoftCq, CompletionsInPushOrderAndPartialBatches) {
    ComplChannel ch;
    Cq cq(&ch, false);
    for (uint64_t id = 1; id <= 5; id++) cq.push(Wc(id));
    EXPECT_FALSE(cq.empty());

    ibv_wc wc[8]{};
    int got = 0;
    ASSERT_EQ(cq.get_wc(3, wc, &got), 0);
    ASSERT_EQ(got, 3);
    EXPECT_EQ(wc[0].wr_id, 1u);
    EXPECT_EQ(wc[1].wr_id, 2u);
    EXPECT_EQ(wc[2].wr_id, 3u);

    // asking for more than is there returns what is there
    ASSERT_EQ(cq.get_wc(8, wc, &got), 0);
    ASSERT_EQ(got, 2);
    EXPECT_EQ(wc[0].wr_id, 4u);
    EXPECT_EQ(wc[1].wr_id, 5u);
    EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_WRITE);

    EXPECT_EQ(cq.get_wc(8, wc, &got), RPMA_E_NO_COMPLETION);
    EXPECT_TRUE(cq.empty());
}

TEST(SoftCq, OneChannelEventPerArming) {
    ComplChannel ch;
    Cq cq(&ch, false);  // armed at creation
    EXPECT_FALSE(Readable(ch));
    cq.push(Wc(1));
    ASSERT_TRUE(Readable(ch));
    EXPECT_EQ(ch.try_wait(), &cq);
    EXPECT_FALSE(Readable(ch));

    // not re-armed: more completions, no event
    cq.push(Wc(2));
    cq.push(Wc(3));
    EXPECT_FALSE(Readable(ch));
    EXPECT_EQ(ch.try_wait(), nullptr);

    // armed again: exactly one event for the next two completions
    cq.arm();
    EXPECT_FALSE(Readable(ch));  // arming alone fires nothing
    cq.push(Wc(4));
    cq.push(Wc(5));
    EXPECT_EQ(ch.try_wait(), &cq);
    EXPECT_EQ(ch.try_wait(), nullptr);

    ibv_wc wc[8];
    int got = 0;
    ASSERT_EQ(cq.get_wc(8, wc, &got), 0);
    EXPECT_EQ(got, 5);  // events or not, every completion is in the ring
}

TEST(SoftCq, WaitConsumesTheEventAndRearms) {
    ComplChannel ch;
    Cq cq(&ch, false);
    cq.push(Wc(1));
    ASSERT_EQ(cq.wait(), 0);  // the event is there: does not block
    EXPECT_FALSE(Readable(ch));
    cq.push(Wc(2));
    EXPECT_EQ(ch.try_wait(), &cq);  // wait() re-armed the CQ
}

TEST(SoftCq, SharedChannelNamesTheCqThatFired) {
    ComplChannel ch;
    Cq a(&ch, true), b(&ch, true);
    EXPECT_EQ(a.wait(), RPMA_E_SHARED_CHANNEL);
    EXPECT_EQ(b.wait(), RPMA_E_SHARED_CHANNEL);
    b.push(Wc(1));
    EXPECT_EQ(ch.wait(), &b);
    a.push(Wc(2));
    EXPECT_EQ(ch.wait(), &a);
    EXPECT_EQ(ch.try_wait(), nullptr);
}

TEST(SoftCq, NonBlockingChannelGivesNoCompletion) {
    ComplChannel ch;
    Cq cq(&ch, false);
    int fl = ::fcntl(ch.fd(), F_GETFL);
    ASSERT_GE(fl, 0);
    ASSERT_EQ(::fcntl(ch.fd(), F_SETFL, fl | O_NONBLOCK), 0);
    EXPECT_TRUE(ch.nonblocking());
    EXPECT_EQ(cq.wait(), RPMA_E_NO_COMPLETION);
    EXPECT_EQ(ch.wait(), nullptr);
    cq.push(Wc(1));
    EXPECT_EQ(cq.wait(), 0);
    EXPECT_EQ(cq.wait(), RPMA_E_NO_COMPLETION);  // re-armed, but nothing fired since
}

}  // namespace
