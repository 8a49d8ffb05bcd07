// A peer: the protection-domain equivalent. Owns the provider's domain (the region table and,
// from the first endpoint or connection on, the progress engine).
#pragma once

#include <atomic>
#include <memory>

#include "provider/provider.h"

namespace rpma {

class Peer {
  public:
    // RPMA_E_NOMEM, or RPMA_E_PROVIDER if the device opens no domain.
    static int create(prov::Device *dev, Peer **out);
    ~Peer();

    prov::Domain &domain() noexcept { return *domain_; }
    const prov::Caps &caps() const noexcept { return caps_; }
    // 0 if this process may use the peer's endpoints, requests and connections; in a forked
    // child once the parent started the engine: RPMA_E_PROVIDER, logged with `what`.
    int check_process(const char *what) const noexcept { return domain_->check_process(what); }

    // Objects that depend on the peer (regions, endpoints, requests, connections, SRQs).
    void ref() noexcept { users_.fetch_add(1); }
    void unref() noexcept { users_.fetch_sub(1); }
    // Deletion succeeds only without users: false (and the peer kept) while any exists.
    bool try_retire() noexcept;
    int users() const noexcept { return users_.load(); }

  private:
    explicit Peer(std::unique_ptr<prov::Domain> d) noexcept
        : domain_(std::move(d)), caps_(domain_->caps()) {}
    std::unique_ptr<prov::Domain> domain_;
    prov::Caps caps_;  // the domain's, fixed when it opens: posts read it without a virtual call
    std::atomic<int> users_{0};
};

}  // namespace rpma
