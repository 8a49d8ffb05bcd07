// Posted receives: an unordered set (SPEC), taken by incoming sends. A responder that finds it
// empty waits (infinite RNR retry) and registers as a waiter to be resumed by the next post.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "provider/provider.h"
#include "provider/soft/region.h"

namespace rpma {

class Cq;

struct PostedRecv {
    std::shared_ptr<Region> region;  // null for a 0-byte receive
    char *ptr = nullptr;
    uint32_t len = 0;
    uint64_t wr_id = 0;
    // false: the region lacks RPMA_MR_USAGE_RECV or belongs to another peer; a message for it
    // completes with IBV_WC_LOC_PROT_ERR and touches nothing, as a NIC checks the lkey
    bool usable = true;
};

class RecvWaiter {
  public:
    virtual ~RecvWaiter() = default;
    virtual void recv_posted() = 0;
};

class RecvQueue final : public prov::SharedRecvQueue {
  public:
    explicit RecvQueue(uint32_t capacity) noexcept : capacity_(capacity) {}
    // RPMA_E_PROVIDER when full, as ibv_post_recv would fail.
    int post(PostedRecv r);
    int post(prov::RecvWr r) override { return post(from_wr(std::move(r))); }
    static PostedRecv from_wr(prov::RecvWr r) noexcept {
        // the domain's regions are all Regions
        return PostedRecv{std::static_pointer_cast<Region>(std::move(r.region)), r.ptr, r.len,
                          r.wr_id, r.usable};
    }
    // Takes one receive, or registers w to be told when one is posted.
    std::optional<PostedRecv> take_or_wait(std::weak_ptr<RecvWaiter> w);
    std::deque<PostedRecv> drain();

  private:
    uint32_t capacity_;
    std::mutex mu_;
    std::deque<PostedRecv> q_;
    std::vector<std::weak_ptr<RecvWaiter>> waiters_;
};

}  // namespace rpma
