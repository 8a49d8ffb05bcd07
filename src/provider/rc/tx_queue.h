// The frames queued on one stream, in order, and the gather-send that takes them: a payload goes
// straight from its region, held across the call (deregistration waits for it, and no byte of
// the region is read after). A frame whose region is gone stops the send; its owner decides
// what it becomes (QueuePair::region_vanished in qp_transmit.cc). The caller holds the stream's
// lock.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

#include "provider/rc/byte_stream.h"
#include "provider/rc/frame.h"
#include "provider/soft/region.h"

namespace rpma::rc {

struct TxItem {
    FrameHeader hdr;
    const char *data;
    size_t len;
    std::shared_ptr<Region> guard;  // the region data points into (requests and read answers)
    uint64_t seq = 0;               // a request's sequence number
    bool zero_fill = false;         // the rest of the payload is zeros: its source vanished
};

class TxQueue {
  public:
    // How a send ended: everything went out; the stream is full (room comes with EPOLLOUT); a
    // frame's region is gone (dead(): rewrite it or fail, then send again); the stream failed
    // (error(): its errno).
    enum class Sent { kAll, kBlocked, kDead, kError };
    Sent send(ByteStream &io);
    TxItem &dead() noexcept { return *dead_; }
    int error() const noexcept { return err_; }

    void push(TxItem item);
    bool empty() const noexcept { return q_.empty(); }
    size_t size() const noexcept { return q_.size(); }
    // items whose data points into a region: a read answer the next write must not overtake
    uint32_t data_items() const noexcept { return data_items_; }
    bool started(const TxItem &it) const noexcept { return &it == &q_.front() && off_ > 0; }
    // The last frame, if nothing of it has left: an ACK there is raised, not repeated.
    TxItem *unsent_back() noexcept {
        return q_.empty() || (q_.size() == 1 && off_ > 0) ? nullptr : &q_.back();
    }
    void drop_region(TxItem &it) noexcept;  // its data is no longer the region's
    // The last request sent whose answer will come on the other way (its ACK or its data).
    uint64_t answer_due() const noexcept { return answer_due_; }

    // A close's pruning: drop(it) says, for each frame not yet begun, whether it goes.
    template <class F>
    void prune(F drop) {
        for (auto it = q_.begin(); it != q_.end();) {
            if (started(*it) || !drop(*it)) {
                ++it;
                continue;
            }
            if (it->guard) --data_items_;
            it = q_.erase(it);
        }
    }
    // Queued before a Disconnect already queued (and after a frame half sent).
    void insert_before_disconnect(TxItem item);

  private:
    // iovecs from off_ on; stops before a frame whose region is gone (*dead) and holds the
    // regions it gathers from (held: released by the caller)
    int gather(iovec *iov, Region **held, int *nheld, TxItem **dead);
    void consume(size_t n);  // n bytes of the queue went out

    std::deque<TxItem> q_;
    size_t off_ = 0;  // bytes of the first frame already sent
    uint32_t data_items_ = 0;
    uint64_t answer_due_ = 0;
    TxItem *dead_ = nullptr;
    int err_ = 0;
};

}  // namespace rpma::rc
