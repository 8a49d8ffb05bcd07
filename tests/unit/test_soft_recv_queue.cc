// The software receive queue (src/provider/soft/recv_queue.h): bounded like ibv_post_recv, taken
// in posting order, a responder that found it empty is told once about the next post, one waiter
// per post in the order they came, a wake that a leaving waiter will not use goes to the next,
// and drain hands back whatever is left; holds_recv tells, without the lock, whether a receive
// is posted.
#include <gtest/gtest.h>
#include <librpma.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "provider/soft/recv_queue.h"
#include "provider/soft/region.h"

using PostedRecv = rpma::prov::RecvWr;
using rpma::RecvQueue;
using rpma::RecvWaiter;

namespace {

PostedRecv Recv(uint64_t wr_id) {
    PostedRecv r;
    r.wr_id = wr_id;
    return r;
}

class CountingWaiter : public RecvWaiter {
  public:
    void recv_posted(bool) override { calls++; }
    int calls = 0;
};

std::shared_ptr<CountingWaiter> Waiter() {
    auto w = std::make_shared<CountingWaiter>();
    w->ref = w;
    return w;
}

TEST(SoftRecvQueue, FullQueueRefusesAPost) {
    RecvQueue q(2);
    EXPECT_EQ(q.post(Recv(1)), 0);
    EXPECT_EQ(q.post(Recv(2)), 0);
    EXPECT_EQ(q.post(Recv(3)), RPMA_E_PROVIDER);
    // taking one makes room for one
    auto w = Waiter();
    ASSERT_TRUE(q.take_or_wait(*w).has_value());
    EXPECT_EQ(q.post(Recv(4)), 0);
    EXPECT_EQ(q.post(Recv(5)), RPMA_E_PROVIDER);
    EXPECT_EQ(w->calls, 0);
}

TEST(SoftRecvQueue, ZeroCapacityRefusesEverything) {
    RecvQueue q(0);
    EXPECT_EQ(q.post(Recv(1)), RPMA_E_PROVIDER);
}

TEST(SoftRecvQueue, TakenInPostingOrder) {
    RecvQueue q(8);
    for (uint64_t id = 10; id < 15; id++) ASSERT_EQ(q.post(Recv(id)), 0);
    auto w = Waiter();
    for (uint64_t id = 10; id < 15; id++) {
        auto r = q.take_or_wait(*w);
        ASSERT_TRUE(r.has_value());
        EXPECT_EQ(r->wr_id, id);
    }
    EXPECT_FALSE(q.take_or_wait(*w).has_value());
}

TEST(SoftRecvQueue, WaiterToldOnceAboutTheNextPost) {
    RecvQueue q(8);
    auto w = Waiter();
    ASSERT_FALSE(q.take_or_wait(*w).has_value());  // registers w
    EXPECT_EQ(w->calls, 0);
    ASSERT_EQ(q.post(Recv(1)), 0);
    EXPECT_EQ(w->calls, 1);
    ASSERT_EQ(q.post(Recv(2)), 0);
    EXPECT_EQ(w->calls, 1);  // it has to register again to hear more
    auto r = q.take_or_wait(*w);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->wr_id, 1u);
}

TEST(SoftRecvQueue, ExpiredWaiterIsSkipped) {
    RecvQueue q(8);
    auto gone = Waiter();
    auto live = Waiter();
    ASSERT_FALSE(q.take_or_wait(*gone).has_value());
    ASSERT_FALSE(q.take_or_wait(*live).has_value());
    gone.reset();
    ASSERT_EQ(q.post(Recv(1)), 0);
    EXPECT_EQ(live->calls, 1);
}

// An SRQ with many connections waiting: each post wakes one of them, first come first woken,
// not all of them (a herd: N wakes per post, N*N/2 for N receives).
TEST(SoftRecvQueue, EachPostWakesOneWaiterInTheOrderTheyCame) {
    RecvQueue q(8);
    std::vector<std::shared_ptr<CountingWaiter>> w;
    for (int i = 0; i < 4; i++) {
        w.push_back(Waiter());
        ASSERT_FALSE(q.take_or_wait(*w.back()).has_value());
    }
    ASSERT_EQ(q.post(Recv(1)), 0);
    EXPECT_EQ(w[0]->calls, 1);
    EXPECT_EQ(w[1]->calls + w[2]->calls + w[3]->calls, 0);
    // the one woken takes it, the next post wakes the next one
    ASSERT_TRUE(q.take_or_wait(*w[0]).has_value());
    ASSERT_EQ(q.post(Recv(2)), 0);
    ASSERT_EQ(q.post(Recv(3)), 0);
    EXPECT_EQ(w[1]->calls, 1);
    EXPECT_EQ(w[2]->calls, 1);
    EXPECT_EQ(w[3]->calls, 0);
}

// A waiter that asks again before its wake (another resume re-ran its request) is listed once,
// and one that takes a receive so is listed no more: the next post wakes the one still waiting.
TEST(SoftRecvQueue, AWaiterIsListedOnceAndTakingUnlistsIt) {
    RecvQueue q(8);
    auto a = Waiter(), b = Waiter();
    ASSERT_FALSE(q.take_or_wait(*a).has_value());
    ASSERT_FALSE(q.take_or_wait(*a).has_value());
    ASSERT_FALSE(q.take_or_wait(*b).has_value());
    ASSERT_EQ(q.post(Recv(1)), 0);  // wakes a
    ASSERT_EQ(q.post(Recv(2)), 0);  // wakes b, not a again
    EXPECT_EQ(a->calls, 1);
    EXPECT_EQ(b->calls, 1);
    ASSERT_TRUE(q.take_or_wait(*a).has_value());
    ASSERT_TRUE(q.take_or_wait(*b).has_value());

    ASSERT_FALSE(q.take_or_wait(*a).has_value());  // listed: a, b
    ASSERT_FALSE(q.take_or_wait(*b).has_value());
    ASSERT_EQ(q.post(Recv(3)), 0);                 // wakes a
    ASSERT_TRUE(q.take_or_wait(*b).has_value());   // but b, listed still, takes it first
    ASSERT_FALSE(q.take_or_wait(*a).has_value());  // so a waits again, and only a does
    ASSERT_EQ(q.post(Recv(4)), 0);
    EXPECT_EQ(a->calls, 3);
    EXPECT_EQ(b->calls, 1);
}

// A waiter that leaves (its connection closed or failed) is woken no more, and a wake it was
// handed for a receive still posted goes to the next waiter.
TEST(SoftRecvQueue, ALeavingWaiterPassesItsWakeOn) {
    RecvQueue q(8);
    auto a = Waiter(), b = Waiter(), c = Waiter();
    for (auto *w : {a.get(), b.get(), c.get()}) ASSERT_FALSE(q.take_or_wait(*w).has_value());
    q.leave(*b);  // listed, nothing posted: no wake
    EXPECT_EQ(a->calls + b->calls + c->calls, 0);
    ASSERT_EQ(q.post(Recv(1)), 0);
    EXPECT_EQ(a->calls, 1);
    q.leave(*a);  // woken, leaves without taking: c is woken for the receive
    EXPECT_EQ(b->calls, 0);
    EXPECT_EQ(c->calls, 1);
    auto r = q.take_or_wait(*c);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->wr_id, 1u);
    ASSERT_EQ(q.post(Recv(2)), 0);  // nobody listed
    EXPECT_EQ(a->calls + b->calls + c->calls, 3 - 1);
    q.leave(*c);  // the receive stays for whoever comes
    auto d = Waiter();
    EXPECT_TRUE(q.take_or_wait(*d).has_value());
}

// The connections of an SRQ take receives from a posting thread as responders do: a wake counts
// only for a take that begins after it (one that finds the taker not waiting is absorbed), some
// takes come with no wake (another resume re-ran the request), and half the takers close midway
// (leave), maybe holding a wake. Every receive is taken once, and none stays posted while a
// taker waits for one: no wake is lost.
TEST(SoftRecvQueue, TakersThatRetryAndLeaveLoseNoWake) {
    constexpr int kTakers = 8, kTotal = 16000;
    RecvQueue q(kTotal);
    struct Taker : RecvWaiter {
        std::atomic<int> wakes{0};
        void recv_posted(bool) override { wakes.fetch_add(1); }
    };
    std::atomic<int> taken{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kTakers; i++) {
        auto t = std::make_shared<Taker>();
        t->ref = t;
        int quit_after = i < kTakers / 2 ? 200 * (i + 1) : kTotal;  // 0-3 close midway
        threads.emplace_back([&q, &taken, t, quit_after] {
            // the bound only turns a lost wake, a hang, into a failure
            auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            for (int got = 0, n = 0; got < quit_after && taken.load() < kTotal; n++) {
                int before = t->wakes.load();
                if (q.take_or_wait(*t)) {
                    got++;
                    taken.fetch_add(1);
                    continue;
                }
                if (n % 3 == 0) continue;  // re-run at once, by another resume
                while (t->wakes.load() == before && taken.load() < kTotal) {
                    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "a wake was lost";
                    std::this_thread::yield();
                }
            }
            q.leave(*t);
        });
    }
    for (int i = 0; i < kTotal; i++) ASSERT_EQ(q.post(Recv(i)), 0);
    for (auto &th : threads) th.join();
    EXPECT_EQ(taken.load(), kTotal);
    EXPECT_FALSE(q.holds_recv());
}

TEST(SoftRecvQueue, DrainTakesEverythingInOrder) {
    RecvQueue q(4);
    for (uint64_t id = 1; id <= 3; id++) ASSERT_EQ(q.post(Recv(id)), 0);
    auto left = q.drain();
    ASSERT_EQ(left.size(), 3u);
    EXPECT_EQ(left[0].wr_id, 1u);
    EXPECT_EQ(left[2].wr_id, 3u);
    EXPECT_TRUE(q.drain().empty());
    auto w = Waiter();
    EXPECT_FALSE(q.take_or_wait(*w).has_value());
    // drained entries no longer count against the capacity
    for (uint64_t id = 1; id <= 4; id++) EXPECT_EQ(q.post(Recv(id)), 0);
}

// holds_recv (read without the lock) follows every post, take, refused post and drain.
TEST(SoftRecvQueue, HoldsRecvFollowsPostsTakesAndDrains) {
    RecvQueue q(2);
    auto w = Waiter();
    EXPECT_FALSE(q.holds_recv());
    ASSERT_EQ(q.post(Recv(1)), 0);
    EXPECT_TRUE(q.holds_recv());
    ASSERT_EQ(q.post(Recv(2)), 0);
    EXPECT_EQ(q.post(Recv(3)), RPMA_E_PROVIDER);
    ASSERT_TRUE(q.take_or_wait(*w).has_value());
    EXPECT_TRUE(q.holds_recv());  // one is left
    ASSERT_TRUE(q.take_or_wait(*w).has_value());
    EXPECT_FALSE(q.holds_recv());
    EXPECT_FALSE(q.take_or_wait(*w).has_value());
    EXPECT_FALSE(q.holds_recv());
    ASSERT_EQ(q.post(Recv(4)), 0);
    EXPECT_TRUE(q.holds_recv());
    EXPECT_EQ(q.drain().size(), 1u);
    EXPECT_FALSE(q.holds_recv());
}

TEST(SoftRecvQueue, ProviderRecvWrKeepsItsFields) {
    RecvQueue q(4);
    char buf[64];
    auto region = std::make_shared<rpma::Region>(buf, sizeof(buf), RPMA_MR_USAGE_RECV, 77);
    rpma::prov::RecvWr wr;
    wr.region = region;
    wr.ptr = buf + 8;
    wr.len = 16;
    wr.wr_id = 42;
    wr.usable = false;
    rpma::prov::SharedRecvQueue &srq = q;
    ASSERT_EQ(srq.post(wr), 0);
    auto w = Waiter();
    auto r = q.take_or_wait(*w);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->region, region);
    EXPECT_EQ(r->ptr, buf + 8);
    EXPECT_EQ(r->len, 16u);
    EXPECT_EQ(r->wr_id, 42u);
    EXPECT_FALSE(r->usable);
}

// A poster lends its reference for the post only (as core does, to spare a count per receive):
// the queue takes its own, so the region outlives the poster's.
TEST(SoftRecvQueue, ABorrowedRegionIsHeldOnceQueued) {
    RecvQueue q(4);
    char buf[64];
    std::shared_ptr<rpma::prov::MemoryRegion> poster =
        std::make_shared<rpma::Region>(buf, sizeof(buf), RPMA_MR_USAGE_RECV, 78);
    std::weak_ptr<rpma::prov::MemoryRegion> alive = poster;
    rpma::prov::RecvWr wr;
    wr.borrowed = &poster;
    wr.ptr = buf;
    wr.len = 8;
    EXPECT_EQ(wr.mr(), poster.get());
    EXPECT_EQ(wr.region, nullptr);  // borrowed: no count taken
    ASSERT_EQ(q.post(wr), 0);
    poster.reset();
    EXPECT_FALSE(alive.expired());
    auto taker = Waiter();
    auto r = q.take_or_wait(*taker);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->borrowed, nullptr);
    EXPECT_EQ(r->mr(), alive.lock().get());
    r.reset();
    EXPECT_TRUE(alive.expired());
}

}  // namespace
