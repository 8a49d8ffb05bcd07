// A completion channel: the fd the application waits on, and which CQ fired. One channel may
// serve a connection's CQ and RCQ (rpma_conn_cfg_set_compl_channel).
#pragma once

#include "core/fd_queue.h"

namespace rpma {

class Cq;

class ComplChannel {
  public:
    bool valid() const noexcept { return q_.valid(); }
    int fd() const noexcept { return q_.fd(); }
    void notify(Cq *cq) { q_.push(cq); }
    // The CQ that fired, or nullptr if the fd is non-blocking and nothing is pending.
    Cq *wait() {
        auto cq = q_.pop();
        return cq ? *cq : nullptr;
    }
    Cq *try_wait() {
        auto cq = q_.try_pop();
        return cq ? *cq : nullptr;
    }
    bool nonblocking() const noexcept { return q_.nonblocking(); }

  private:
    FdQueue<Cq *> q_;
};

}  // namespace rpma
