// The software receive queue (src/provider/soft/recv_queue.h): bounded like ibv_post_recv, taken
// in posting order, a responder that found it empty is told once about the next post, and drain
// hands back whatever is left; holds_recv tells, without the lock, whether a receive is posted.
#include <gtest/gtest.h>
#include <librpma.h>

#include <memory>

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
    void recv_posted() override { calls++; }
    int calls = 0;
};

TEST(SoftRecvQueue, FullQueueRefusesAPost) {
    RecvQueue q(2);
    EXPECT_EQ(q.post(Recv(1)), 0);
    EXPECT_EQ(q.post(Recv(2)), 0);
    EXPECT_EQ(q.post(Recv(3)), RPMA_E_PROVIDER);
    // taking one makes room for one
    auto w = std::make_shared<CountingWaiter>();
    ASSERT_TRUE(q.take_or_wait(w).has_value());
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
    auto w = std::make_shared<CountingWaiter>();
    for (uint64_t id = 10; id < 15; id++) {
        auto r = q.take_or_wait(w);
        ASSERT_TRUE(r.has_value());
        EXPECT_EQ(r->wr_id, id);
    }
    EXPECT_FALSE(q.take_or_wait(w).has_value());
}

TEST(SoftRecvQueue, WaiterToldOnceAboutTheNextPost) {
    RecvQueue q(8);
    auto w = std::make_shared<CountingWaiter>();
    ASSERT_FALSE(q.take_or_wait(w).has_value());  // registers w
    EXPECT_EQ(w->calls, 0);
    ASSERT_EQ(q.post(Recv(1)), 0);
    EXPECT_EQ(w->calls, 1);
    ASSERT_EQ(q.post(Recv(2)), 0);
    EXPECT_EQ(w->calls, 1);  // it has to register again to hear more
    auto r = q.take_or_wait(w);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->wr_id, 1u);
}

TEST(SoftRecvQueue, ExpiredWaiterIsSkipped) {
    RecvQueue q(8);
    auto gone = std::make_shared<CountingWaiter>();
    auto live = std::make_shared<CountingWaiter>();
    ASSERT_FALSE(q.take_or_wait(gone).has_value());
    ASSERT_FALSE(q.take_or_wait(live).has_value());
    gone.reset();
    ASSERT_EQ(q.post(Recv(1)), 0);
    EXPECT_EQ(live->calls, 1);
}

TEST(SoftRecvQueue, DrainTakesEverythingInOrder) {
    RecvQueue q(4);
    for (uint64_t id = 1; id <= 3; id++) ASSERT_EQ(q.post(Recv(id)), 0);
    auto left = q.drain();
    ASSERT_EQ(left.size(), 3u);
    EXPECT_EQ(left[0].wr_id, 1u);
    EXPECT_EQ(left[2].wr_id, 3u);
    EXPECT_TRUE(q.drain().empty());
    auto w = std::make_shared<CountingWaiter>();
    EXPECT_FALSE(q.take_or_wait(w).has_value());
    // drained entries no longer count against the capacity
    for (uint64_t id = 1; id <= 4; id++) EXPECT_EQ(q.post(Recv(id)), 0);
}

// holds_recv (read without the lock) follows every post, take, refused post and drain.
TEST(SoftRecvQueue, HoldsRecvFollowsPostsTakesAndDrains) {
    RecvQueue q(2);
    auto w = std::make_shared<CountingWaiter>();
    EXPECT_FALSE(q.holds_recv());
    ASSERT_EQ(q.post(Recv(1)), 0);
    EXPECT_TRUE(q.holds_recv());
    ASSERT_EQ(q.post(Recv(2)), 0);
    EXPECT_EQ(q.post(Recv(3)), RPMA_E_PROVIDER);
    ASSERT_TRUE(q.take_or_wait(w).has_value());
    EXPECT_TRUE(q.holds_recv());  // one is left
    ASSERT_TRUE(q.take_or_wait(w).has_value());
    EXPECT_FALSE(q.holds_recv());
    EXPECT_FALSE(q.take_or_wait(w).has_value());
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
    auto w = std::make_shared<CountingWaiter>();
    auto r = q.take_or_wait(w);
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
    auto r = q.take_or_wait(std::make_shared<CountingWaiter>());
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->borrowed, nullptr);
    EXPECT_EQ(r->mr(), alive.lock().get());
    r.reset();
    EXPECT_TRUE(alive.expired());
}

}  // namespace
