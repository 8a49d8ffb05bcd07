#include "provider/verbs/region.h"

#include <unistd.h>

#include <cstring>

#include "common/log.h"

namespace rpma::verbs {

Region::Region(ibv_mr *mr, int usage) noexcept
    : prov::MemoryRegion(static_cast<char *>(mr->addr), mr->length, usage, mr->rkey, mr->lkey),
      mr_(mr),
      pid_(::getpid()) {}

Region::~Region() {
    release(::getpid() == pid_);
}

void Region::release(bool same_process) noexcept {
    if (!mr_) return;
    if (same_process)
        if (int err = ibv_dereg_mr(mr_)) RPMA_LOG_ERROR("ibv_dereg_mr: %s", std::strerror(err));
    mr_ = nullptr;
}

}  // namespace rpma::verbs
