// The send queue: a ring of work requests, posted by the requester and completed by the
// completer in order. Sequence numbers count the posts from 1, so entry seq sits at slot
// (seq - 1) mod the ring's size (a power of two), and [done + 1, posted] are the requests still
// outstanding. The ring grows to the deepest queue the connection has used, never beyond
// sq_size (the caller checks that), so a large sq_size costs memory only when it is used. Today
// one mutex (the queue pair's sq_mu_) guards it all (docs/rc-rebuild.md, step c).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "provider/rc/frame.h"
#include "provider/soft/region.h"

namespace rpma::rc {

struct Wqe {
    uint64_t seq = 0;
    uint64_t wr_id = 0;
    Op op = Op::kWrite;
    bool signaled = false;
    char *dst = nullptr;  // a read's destination
    uint32_t len = 0;
    std::shared_ptr<Region> dst_region;
    bool local_error = false;  // completes with IBV_WC_LOC_PROT_ERR in its turn
    // a read completes with its data; one with a local error was sent as an empty write
    bool awaits_data() const noexcept { return op == Op::kRead && !local_error; }
};

class SendQueue {
  public:
    SendQueue() = default;

    uint64_t posted() const noexcept { return posted_; }  // the last sequence number given
    uint64_t done() const noexcept { return done_; }      // every request up to here completed
    size_t outstanding() const noexcept { return static_cast<size_t>(posted_ - done_); }
    bool empty() const noexcept { return posted_ == done_; }
    // Room is the caller's to check (outstanding() < sq_size): it also counts the completed
    // requests whose slots the application has not reclaimed yet.
    uint64_t post(Wqe w) {
        if (outstanding() == ring_.size()) grow();
        w.seq = ++posted_;
        slot(w.seq) = std::move(w);
        return posted_;
    }
    Wqe &front() noexcept { return slot(done_ + 1); }  // not empty()
    // The oldest request leaves the ring (its region with it: the slot keeps nothing).
    Wqe pop() noexcept {
        Wqe w = std::move(front());
        ++done_;
        return w;
    }
    // Every outstanding request leaves without a completion (the queue pair is closed).
    void clear() noexcept {
        while (!empty()) pop();
    }

  private:
    // a mask, not %: a division per access costs more than the rest of the lookup
    Wqe &slot(uint64_t seq) noexcept { return ring_[(seq - 1) & (ring_.size() - 1)]; }
    void grow() {
        std::vector<Wqe> bigger(std::max<size_t>(kFirstSize, 2 * ring_.size()));
        for (uint64_t seq = done_ + 1; seq <= posted_; ++seq)
            bigger[(seq - 1) & (bigger.size() - 1)] = std::move(slot(seq));
        ring_.swap(bigger);
    }

    static constexpr size_t kFirstSize = 16;  // a power of two, as every size after it
    static_assert((kFirstSize & (kFirstSize - 1)) == 0);

    std::vector<Wqe> ring_;
    uint64_t posted_ = 0;
    uint64_t done_ = 0;
};

}  // namespace rpma::rc
