// The verbs provider's domain: one rpma_peer's protection domain on an RDMA device.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <memory>

#include "provider/provider.h"

namespace rpma::verbs {

class Domain final : public prov::Domain {
  public:
    // 0, RPMA_E_NOMEM, RPMA_E_PROVIDER or, ibv_alloc_pd failing without errno, RPMA_E_UNKNOWN.
    static int create(ibv_context *ctx, std::unique_ptr<Domain> *out);
    ~Domain() override;

    const prov::Caps &caps() const noexcept override { return caps_; }
    int check_process(const char *what) const noexcept override;

    int register_memory(char *addr, size_t size, int usage,
                        std::shared_ptr<prov::MemoryRegion> *out) override;
    void deregister(const std::shared_ptr<prov::MemoryRegion> &mr) noexcept override;
    int advise(const prov::MemoryRegion &mr, char *start, size_t len, int advice,
               uint32_t flags) override;

    int create_channel(std::unique_ptr<prov::CompletionChannel> *out) override;
    int create_cq(prov::CompletionChannel *channel, bool shared, uint32_t size,
                  std::unique_ptr<prov::CompletionQueue> *out) override;
    int create_srq(uint32_t size, std::unique_ptr<prov::SharedRecvQueue> *out) override;

    int listen(const char *addr, const char *port, std::shared_ptr<prov::Listener> *out) override;
    int create_qp(const char *addr, const char *port, const prov::QpAttr &attr,
                  std::shared_ptr<prov::QueuePair> *out) override;
    int create_qp(const prov::QpAttr &attr, prov::IncomingRequest &req,
                  std::shared_ptr<prov::QueuePair> *out) override;

    ibv_pd *pd() const noexcept { return pd_; }
    bool native_atomic_write() const noexcept { return native_atomic_write_; }

  private:
    Domain(ibv_context *ctx, ibv_pd *pd, const prov::Caps &caps, bool native_aw, bool odp) noexcept;

    ibv_context *ctx_;
    ibv_pd *pd_;
    prov::Caps caps_;
    bool native_atomic_write_;
    bool odp_;
    pid_t pid_;  // a forked child must not use the parent's verbs objects
};

}  // namespace rpma::verbs
