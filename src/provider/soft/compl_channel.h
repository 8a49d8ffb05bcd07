// A completion channel: an fd queue of the CQs that fired.
#pragma once

#include "common/fd_queue.h"
#include "provider/provider.h"

namespace rpma {

class ComplChannel final : public prov::CompletionChannel {
  public:
    bool valid() const noexcept { return q_.valid(); }
    int fd() const noexcept override { return q_.fd(); }
    void notify(prov::CompletionQueue *cq) { q_.push(cq); }
    prov::CompletionQueue *wait() override {
        auto cq = q_.pop();
        return cq ? *cq : nullptr;
    }
    prov::CompletionQueue *try_wait() {
        auto cq = q_.try_pop();
        return cq ? *cq : nullptr;
    }
    bool nonblocking() const noexcept { return q_.nonblocking(); }

  private:
    FdQueue<prov::CompletionQueue *> q_;
};

}  // namespace rpma
