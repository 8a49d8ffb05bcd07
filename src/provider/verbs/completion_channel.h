// A verbs completion channel: the fd rpma_cq_get_fd and rpma_conn_get_compl_fd hand out. One
// channel may serve a connection's CQ and RCQ.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <mutex>

#include "provider/provider.h"

namespace rpma::verbs {

class CompletionChannel final : public prov::CompletionChannel {
  public:
    static int create(ibv_context *ctx, std::unique_ptr<prov::CompletionChannel> *out);
    ~CompletionChannel() override;
    int fd() const noexcept override { return ch_->fd; }
    // Takes one event (acknowledged at once) and returns its CQ; nullptr when the fd is
    // non-blocking and nothing fired, or on an error (logged).
    prov::CompletionQueue *wait() override;
    // Takes one event, acknowledges it and, with rearm, re-arms its CQ, all with cancellation
    // off: 0, RPMA_E_NO_COMPLETION when the fd is non-blocking and nothing fired,
    // RPMA_E_PROVIDER (logged). A cancelled caller takes nothing.
    int take(ibv_cq **cq, void **context, bool rearm = false);
    ibv_comp_channel *raw() const noexcept { return ch_; }

  private:
    explicit CompletionChannel(ibv_comp_channel *ch) noexcept;
    ibv_comp_channel *ch_;
    pid_t pid_;
    std::mutex take_mu_;  // one taker reads the fd at a time (take_when_readable)
};

}  // namespace rpma::verbs
