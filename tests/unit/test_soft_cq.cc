// The software CQ and its completion channel (src/provider/soft/cq.h): completions come out in
// push order and in batches of at most num_entries, the channel gets one event per arming, and
// rpma_cq_wait's error codes for a shared and a non-blocking channel; and the progress hook
// (ProgressHook) that get_wc and wait run, with a fake hook in place of a queue pair.
#include <gtest/gtest.h>
#include <librpma.h>
#include <poll.h>

#include <atomic>
#include <functional>
#include <future>

#include "common/fd.h"
#include "provider/soft/compl_channel.h"
#include "provider/soft/cq.h"

using rpma::ComplChannel;
using rpma::Cq;
using rpma::nonblocking;
using rpma::ProgressHook;
using rpma::readable_now;
using rpma::set_nonblocking;

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
    return readable_now(ch.fd());
}

// The channel's fd made O_NONBLOCK, as an application that polls it does.
void MakeNonBlocking(const ComplChannel &ch) {
    set_nonblocking(ch.fd(), true);
    ASSERT_TRUE(nonblocking(ch.fd()));
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
    ASSERT_NO_FATAL_FAILURE(MakeNonBlocking(ch));
    EXPECT_TRUE(ch.nonblocking());
    EXPECT_EQ(cq.wait(), RPMA_E_NO_COMPLETION);
    EXPECT_EQ(ch.wait(), nullptr);
    cq.push(Wc(1));
    EXPECT_EQ(cq.wait(), 0);
    EXPECT_EQ(cq.wait(), RPMA_E_NO_COMPLETION);  // re-armed, but nothing fired since
}

// A hook that follows the protocol of ProgressHook as the queue pair does: disarmed while it
// runs, armed only across its sleep on the channel. Its pass is the test's.
class FakeHook : public ProgressHook {
  public:
    void progress(Cq &cq, bool wait, int channel_fd) override {
        calls++;
        if (wait) waits++;
        bool armed = cq.disarm();
        if (wait && !produced_once) {
            produced_once = true;
            cq.arm();  // the last look before the sleep: armed first
            if (cq.empty()) {
                if (asleep) asleep();
                pollfd p{channel_fd, POLLIN, 0};
                ::poll(&p, 1, -1);
            }
            cq.disarm();
        }
        if (pass) pass(cq);
        if (!wait && armed) cq.arm();
    }
    std::atomic<int> calls{0}, waits{0};
    bool produced_once = true;       // false: the first waiting pass sleeps
    std::function<void()> asleep;    // called just before that sleep
    std::function<void(Cq &)> pass;  // the work of each pass (pushes)
};

// The waiter's own pushes need no wake-up: the channel's eventfd stays unwritten, and the CQ
// is armed again when wait returns.
TEST(SoftCqHook, AWaitersOwnPushesWriteNoEvent) {
    ComplChannel ch;
    Cq cq(&ch, false);
    FakeHook hook;
    hook.pass = [](Cq &c) { c.push(Wc(1)); };
    cq.set_hook(&hook);
    ASSERT_EQ(cq.wait(), 0);
    EXPECT_EQ(hook.waits.load(), 1);
    EXPECT_FALSE(Readable(ch));
    ibv_wc wc[2];
    int got = 0;
    ASSERT_EQ(cq.get_wc(2, wc, &got), 0);
    EXPECT_EQ(got, 1);
    EXPECT_EQ(wc[0].wr_id, 1u);
    // re-armed on return: another thread's push fires the channel once
    hook.pass = nullptr;
    cq.push(Wc(2));
    EXPECT_EQ(ch.try_wait(), &cq);
    EXPECT_EQ(ch.try_wait(), nullptr);
}

// A push from another thread while the waiter sleeps in its hook wakes it, and wait returns
// with that completion and the event consumed.
TEST(SoftCqHook, AnotherThreadsPushWakesTheSleepingWaiter) {
    ComplChannel ch;
    Cq cq(&ch, false);
    FakeHook hook;
    hook.produced_once = false;
    std::promise<void> asleep;
    hook.asleep = [&] { asleep.set_value(); };
    cq.set_hook(&hook);
    auto waiter = std::async(std::launch::async, [&] { return cq.wait(); });
    asleep.get_future().wait();  // armed, the ring empty: about to poll the channel
    cq.push(Wc(7));
    ASSERT_EQ(waiter.wait_for(std::chrono::seconds(20)), std::future_status::ready)
        << "the push did not wake the waiter";
    EXPECT_EQ(waiter.get(), 0);
    EXPECT_FALSE(Readable(ch));  // the wake-up's event was taken by the wait
    ibv_wc wc;
    int got = 0;
    ASSERT_EQ(cq.get_wc(1, &wc, &got), 0);
    EXPECT_EQ(wc.wr_id, 7u);
    cq.push(Wc(8));
    EXPECT_EQ(ch.try_wait(), &cq);  // re-armed
}

// Each get_wc that finds the ring empty runs the hook once; one that finds entries does not.
TEST(SoftCqHook, EachEmptyGetWcRunsTheHookOnce) {
    ComplChannel ch;
    Cq cq(&ch, false);
    FakeHook hook;
    cq.set_hook(&hook);
    ibv_wc wc;
    int got = 0;
    for (int i = 1; i <= 3; i++) {
        EXPECT_EQ(cq.get_wc(1, &wc, &got), RPMA_E_NO_COMPLETION);
        EXPECT_EQ(hook.calls.load(), i);
    }
    cq.push(Wc(1));  // armed: an event, as a push from another thread
    EXPECT_EQ(ch.try_wait(), &cq);
    ASSERT_EQ(cq.get_wc(1, &wc, &got), 0);
    EXPECT_EQ(hook.calls.load(), 3);
}

// A poll pass that pushes while the CQ is disarmed (its event taken, not re-armed) writes no
// event, as verbs would not, and leaves the CQ disarmed; its completion is returned at once.
TEST(SoftCqHook, APollPassThatPushesWhileDisarmedWritesNoEvent) {
    ComplChannel ch;
    Cq cq(&ch, false);
    FakeHook hook;
    cq.set_hook(&hook);
    cq.push(Wc(1));
    EXPECT_EQ(ch.try_wait(), &cq);  // taken without re-arming (ibv_get_cq_event alone)
    ibv_wc wc;
    int got = 0;
    ASSERT_EQ(cq.get_wc(1, &wc, &got), 0);
    hook.pass = [](Cq &c) { c.push(Wc(2)); };
    ASSERT_EQ(cq.get_wc(1, &wc, &got), 0);
    EXPECT_EQ(wc.wr_id, 2u);
    EXPECT_EQ(hook.calls.load(), 1);
    EXPECT_FALSE(Readable(ch));
    hook.pass = nullptr;
    cq.push(Wc(3));  // still disarmed
    EXPECT_FALSE(Readable(ch));
    cq.arm();
    cq.push(Wc(4));
    EXPECT_EQ(ch.try_wait(), &cq);
}

// A poll pass that pushes while the CQ is armed ends with the one event verbs would have
// written for its first completion, and the CQ disarmed, even though the caller took one of
// the two: a thread asleep on the channel's fd is woken for the one left in the ring.
TEST(SoftCqHook, APollPassThatPushesWhileArmedWritesOneEventAndDisarms) {
    ComplChannel ch;
    Cq cq(&ch, false);  // armed at creation
    FakeHook hook;
    hook.pass = [](Cq &c) {
        c.push(Wc(1));
        c.push(Wc(2));
    };
    cq.set_hook(&hook);
    ibv_wc wc;
    int got = 0;
    ASSERT_EQ(cq.get_wc(1, &wc, &got), 0);
    EXPECT_EQ(wc.wr_id, 1u);
    EXPECT_EQ(hook.calls.load(), 1);
    ASSERT_TRUE(Readable(ch));
    EXPECT_EQ(ch.try_wait(), &cq);
    EXPECT_EQ(ch.try_wait(), nullptr);  // one event for both pushes
    hook.pass = nullptr;
    cq.push(Wc(3));  // disarmed by that event: none more
    EXPECT_FALSE(Readable(ch));
    ASSERT_EQ(cq.get_wc(1, &wc, &got), 0);
    EXPECT_EQ(wc.wr_id, 2u);
    // re-armed as rpma_cq_wait does: a pass that pushes nothing writes nothing
    cq.arm();
    ASSERT_EQ(cq.get_wc(1, &wc, &got), 0);
    EXPECT_EQ(wc.wr_id, 3u);
    EXPECT_EQ(cq.get_wc(1, &wc, &got), RPMA_E_NO_COMPLETION);
    EXPECT_FALSE(Readable(ch));
}

// An event that fired before the wait ends it at once, without a pass; a shared or
// non-blocking channel never runs the hook.
TEST(SoftCqHook, AFiredEventEndsTheWaitWithoutAPass) {
    ComplChannel ch;
    Cq cq(&ch, false);
    FakeHook hook;
    cq.set_hook(&hook);
    cq.push(Wc(1));
    ASSERT_EQ(cq.wait(), 0);
    EXPECT_EQ(hook.calls.load(), 0);
    EXPECT_FALSE(Readable(ch));

    ComplChannel shared;
    Cq a(&shared, true);
    a.set_hook(&hook);
    EXPECT_EQ(a.wait(), RPMA_E_SHARED_CHANNEL);

    ComplChannel nb;
    Cq b(&nb, false);
    b.set_hook(&hook);
    ASSERT_NO_FATAL_FAILURE(MakeNonBlocking(nb));
    EXPECT_EQ(b.wait(), RPMA_E_NO_COMPLETION);
    EXPECT_EQ(hook.calls.load(), 0);
}

// The hook goes (its queue pair closed) while a waiter passes: the wait goes on on the channel
// alone, armed, and a completion pushed while the hook had the CQ disarmed still ends it.
TEST(SoftCqHook, AWaitWhoseHookGoesFallsBackToTheChannel) {
    ComplChannel ch;
    Cq cq(&ch, false);
    FakeHook hook;
    hook.pass = [&](Cq &c) {
        c.set_hook(nullptr);
        c.push(Wc(5));  // disarmed by the hook: no event
    };
    cq.set_hook(&hook);
    ASSERT_EQ(cq.wait(), 0);
    ibv_wc wc;
    int got = 0;
    ASSERT_EQ(cq.get_wc(1, &wc, &got), 0);
    EXPECT_EQ(wc.wr_id, 5u);
    cq.push(Wc(6));
    EXPECT_EQ(ch.try_wait(), &cq);  // armed again
}

}  // namespace
