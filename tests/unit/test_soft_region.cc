// Registered regions and the rkey table (src/provider/soft/{region,mr_table}.h): rkeys are unique
// and never 0, a removed rkey stops resolving, contains() is overflow-safe at every edge, and
// kill() returns only once a RegionUse held by another thread has ended.
#include <gtest/gtest.h>
#include <librpma.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "provider/soft/mr_table.h"
#include "provider/soft/region.h"

using namespace std::chrono_literals;
using rpma::MrTable;
using rpma::Region;
using rpma::RegionUse;

namespace {

char *At(uint64_t addr) {
    return reinterpret_cast<char *>(static_cast<uintptr_t>(addr));
}

TEST(SoftMrTable, RkeysAreUniqueAndNonZero) {
    MrTable t;
    char buf[16];
    std::vector<std::shared_ptr<Region>> live;
    std::set<uint32_t> seen;
    for (int i = 0; i < 2000; i++) {
        auto r = t.add(buf, sizeof(buf), RPMA_MR_USAGE_READ_SRC);
        ASSERT_NE(r, nullptr);
        EXPECT_NE(r->rkey(), 0u);
        EXPECT_TRUE(seen.insert(r->rkey()).second) << "rkey " << r->rkey() << " given twice";
        live.push_back(r);
    }
    for (auto &r : live) EXPECT_EQ(t.find(r->rkey()), r);
    EXPECT_EQ(live[0]->addr(), buf);
    EXPECT_EQ(live[0]->size(), sizeof(buf));
    EXPECT_EQ(live[0]->usage(), RPMA_MR_USAGE_READ_SRC);
}

TEST(SoftMrTable, RemovedRkeyStopsResolving) {
    MrTable t;
    char buf[16];
    auto a = t.add(buf, sizeof(buf), RPMA_MR_USAGE_WRITE_DST);
    auto b = t.add(buf, sizeof(buf), RPMA_MR_USAGE_WRITE_DST);
    t.remove(a->rkey());
    EXPECT_EQ(t.find(a->rkey()), nullptr);
    EXPECT_EQ(t.find(b->rkey()), b);  // the other one stays
    t.remove(a->rkey());              // twice: harmless
    EXPECT_EQ(t.find(0), nullptr);
}

TEST(SoftMrTable, ChosenRkeyMustBeFreeAndNonZero) {
    MrTable t;
    char buf[16];
    EXPECT_EQ(t.add_with_rkey(buf, sizeof(buf), 0, 0), nullptr);
    auto r = t.add_with_rkey(buf, sizeof(buf), 0, 0x1234);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->rkey(), 0x1234u);
    EXPECT_EQ(t.add_with_rkey(buf, sizeof(buf), 0, 0x1234), nullptr);
    EXPECT_EQ(t.find(0x1234), r);
}

TEST(SoftRegion, ContainsEdges) {
    const uint64_t base = 0x10000, size = 4096;
    Region r(At(base), size, 0, 1);
    EXPECT_TRUE(r.contains(base, 0));
    EXPECT_TRUE(r.contains(base, size));
    EXPECT_TRUE(r.contains(base + 10, size - 10));
    EXPECT_TRUE(r.contains(base + size - 1, 1));
    EXPECT_TRUE(r.contains(base + size, 0));  // an empty range at the end
    EXPECT_FALSE(r.contains(base + size, 1));
    EXPECT_FALSE(r.contains(base + 10, size - 9));
    EXPECT_FALSE(r.contains(base + 1, size));
    EXPECT_FALSE(r.contains(base - 1, 1));
    EXPECT_FALSE(r.contains(base - 1, 2));
    EXPECT_FALSE(r.contains(base + size + 1, 0));
    // lengths and addresses whose sum wraps around
    EXPECT_FALSE(r.contains(base, UINT64_MAX));
    EXPECT_FALSE(r.contains(base + 1, UINT64_MAX));
    EXPECT_FALSE(r.contains(UINT64_MAX, 2));
    EXPECT_FALSE(r.contains(UINT64_MAX - 1, UINT64_MAX));
}

TEST(SoftRegion, ContainsAtTheTopOfTheAddressSpace) {
    const uint64_t size = 100, base = UINT64_MAX - size + 1;  // ends exactly at 2^64
    Region r(At(base), size, 0, 1);
    EXPECT_TRUE(r.contains(base, size));
    EXPECT_TRUE(r.contains(UINT64_MAX, 1));
    EXPECT_FALSE(r.contains(UINT64_MAX, 2));
    EXPECT_FALSE(r.contains(base + 50, 51));
    EXPECT_FALSE(r.contains(0, 1));
}

TEST(SoftRegion, AcquireFailsAfterKill) {
    char buf[8];
    Region r(buf, sizeof(buf), 0, 1);
    {
        RegionUse u(&r);
        EXPECT_TRUE(u.ok());
    }
    r.kill();  // nobody inside: returns at once
    RegionUse u(&r);
    EXPECT_FALSE(u.ok());
    EXPECT_FALSE(r.acquire());
    RegionUse none(nullptr);
    EXPECT_FALSE(none.ok());
}

TEST(SoftRegion, KillWaitsForAUseOnAnotherThread) {
    struct Shared {
        char buf[8];
        Region region{buf, sizeof(buf), 0, 1};
        std::atomic<bool> inside{false}, leave{false}, killed{false};
    };
    auto s = std::make_shared<Shared>();
    std::thread user([s] {
        RegionUse u(&s->region);
        s->inside = u.ok();
        while (!s->leave) std::this_thread::sleep_for(1ms);
        // the use ends here, and only then may kill() return
    });
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!s->inside && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(s->inside);

    std::thread killer([s] {
        s->region.kill();
        s->killed = true;
    });
    // the region is dead as soon as kill() starts: new uses fail while the old one lasts
    deadline = std::chrono::steady_clock::now() + 10s;
    while (RegionUse(&s->region).ok() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(1ms);
    EXPECT_FALSE(RegionUse(&s->region).ok());
    std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(s->killed) << "kill() returned while a RegionUse was held";

    s->leave = true;
    user.join();
    deadline = std::chrono::steady_clock::now() + 10s;
    while (!s->killed && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(1ms);
    EXPECT_TRUE(s->killed) << "kill() still waiting after the use ended";
    if (s->killed) {
        killer.join();
    } else {
        killer.detach();  // holds s alive; the test has failed already
    }
}

}  // namespace
