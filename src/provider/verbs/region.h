// A verbs memory registration. The lkey and rkey are the device's; the registration ends at
// release() (rpma_mr_dereg), after which the device refuses both keys.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include "provider/provider.h"

namespace rpma::verbs {

class Region final : public prov::MemoryRegion {
  public:
    Region(ibv_mr *mr, int usage) noexcept;
    ~Region() override;
    // Deregisters; `same_process` false (a forked child) only forgets the parent's registration.
    void release(bool same_process) noexcept;

  private:
    ibv_mr *mr_;
    pid_t pid_;  // a forked child never deregisters the parent's memory
};

// The lkey to post for a region of any provider: a region that is not a verbs one has key 0,
// which the device refuses, so the request completes with a local protection error, as a NIC's
// would.
inline uint32_t lkey_of(const prov::MemoryRegion *r) noexcept {
    return r->lkey();
}

}  // namespace rpma::verbs
