// A verbs completion queue, armed at creation on its channel, re-armed by rpma_cq_wait as
// upstream does. One completion may be held back by empty() (rpma_conn_wait's
// WAIT_FOR_COMPLETION must look without taking); get_wc hands it out first.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <atomic>
#include <mutex>

#include "provider/provider.h"
#include "provider/verbs/completion_channel.h"

namespace rpma::verbs {

class CompletionQueue final : public prov::CompletionQueue {
  public:
    static int create(ibv_context *ctx, CompletionChannel *channel, bool shared, uint32_t size,
                      std::unique_ptr<prov::CompletionQueue> *out);
    ~CompletionQueue() override;

    int fd() const noexcept override { return channel_->fd(); }
    int get_wc(int num_entries, ibv_wc *wc, int *got) override;
    int wait() override;
    void arm() noexcept override;
    bool empty() override;
    ibv_cq *raw() const noexcept { return cq_; }

  private:
    CompletionQueue(CompletionChannel *channel, bool shared) noexcept;
    CompletionChannel *channel_;
    bool shared_;
    ibv_cq *cq_ = nullptr;
    pid_t pid_;
    std::mutex held_mu_;
    std::atomic<bool> has_held_{false};
    ibv_wc held_{};
};

}  // namespace rpma::verbs
