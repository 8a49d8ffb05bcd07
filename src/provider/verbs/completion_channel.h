// A verbs completion channel: the fd rpma_cq_get_fd and rpma_conn_get_compl_fd hand out. One
// channel may serve a connection's CQ and RCQ.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

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
    ibv_comp_channel *raw() const noexcept { return ch_; }

  private:
    explicit CompletionChannel(ibv_comp_channel *ch) noexcept;
    ibv_comp_channel *ch_;
    pid_t pid_;
};

}  // namespace rpma::verbs
