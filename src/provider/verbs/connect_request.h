// A connection request taken from a listener: the new rdma_cm id and the client's private data.
// Destroyed unanswered, it is rejected. The queue pair made for it borrows the id and takes it
// over when it accepts.
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/types.h>

#include <vector>

#include "provider/provider.h"

namespace rpma::verbs {

class ConnectRequest final : public prov::IncomingRequest {
  public:
    ConnectRequest(rdma_cm_id *id, const void *pdata, uint8_t len);
    ~ConnectRequest() override;
    const std::vector<uint8_t> &private_data() const noexcept override { return pdata_; }
    rdma_cm_id *id() const noexcept { return id_; }
    // The queue pair accepted: the id is its own from now on.
    rdma_cm_id *release() noexcept;
    // The queue pair accepts: it keeps the bytes, at the address the application was shown.
    std::vector<uint8_t> take_private_data() noexcept { return std::move(pdata_); }

  private:
    rdma_cm_id *id_;
    std::vector<uint8_t> pdata_;
    pid_t pid_;
};

}  // namespace rpma::verbs
