// A verbs listener (rpma_ep): a listening rdma_cm id on its own event channel, whose fd is the
// one rpma_ep_get_fd hands out; each CONNECT_REQUEST read from it becomes a ConnectRequest.
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/types.h>

#include <mutex>

#include "provider/provider.h"

namespace rpma::verbs {

class Listener final : public prov::Listener {
  public:
    // 0, or RPMA_E_PROVIDER (the address or port, logged with the cause).
    static int create(const char *addr, const char *port, std::shared_ptr<prov::Listener> *out);
    ~Listener() override;
    int fd() const noexcept override { return ch_->fd; }
    std::unique_ptr<prov::IncomingRequest> next() override;
    void close() override;

  private:
    Listener(rdma_event_channel *ch, rdma_cm_id *id) noexcept;
    rdma_event_channel *ch_;
    rdma_cm_id *id_;
    pid_t pid_;
    std::mutex mu_;  // close() and next() read the channel one at a time
    bool closed_ = false;
};

}  // namespace rpma::verbs
