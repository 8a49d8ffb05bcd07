// A verbs device: an RDMA NIC (or soft-RoCE) that rdma_cm finds for an address. The ibv_context
// handed out is rdma_cm's own, so an application may make any verbs call on it.
#pragma once

#include <infiniband/verbs.h>
#include <librpma.h>

#include "provider/provider.h"

namespace rpma::verbs {

class Device final : public prov::Device {
  public:
    // The device that rdma_cm binds addr to (LOCAL) or resolves it through (REMOTE). `quiet`:
    // the caller falls back to another provider, so a miss is logged at INFO only.
    // 0, or RPMA_E_PROVIDER when no RDMA device serves the address.
    static int lookup(const char *addr, rpma_util_ibv_context_type type, bool quiet,
                      ibv_context **out);
    // The device behind a context handed out by lookup, or nullptr.
    static Device *from_context(const ibv_context *ctx) noexcept;
    // True when this host has the rdma_cm character device (one access(2), nothing loaded).
    static bool stack_present() noexcept;
    // rdma-core's fork support for a kernel that answers `status` (ibv_is_fork_initialized):
    // ibv_fork_init only where the kernel does not copy DMA-pinned pages into a child itself.
    // lookup does this once per process, before the first registration. 0 or ibv_fork_init's
    // error (logged at INFO: not fatal).
    static int set_up_fork_support(ibv_fork_status status) noexcept;

    explicit Device(ibv_context *ctx) noexcept : ctx_(ctx) {}
    ibv_context *context() noexcept override { return ctx_; }
    int odp_capable(int *out) override;
    int open_domain(std::unique_ptr<prov::Domain> *out) override;

  private:
    ibv_context *ctx_;  // owned by librdmacm for the life of the process
};

}  // namespace rpma::verbs
