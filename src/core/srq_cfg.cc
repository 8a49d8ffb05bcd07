#include "core/srq_cfg.h"

namespace rpma {

const SrqCfg &SrqCfg::defaults() noexcept {
    static const SrqCfg kDefaults;
    return kDefaults;
}

}  // namespace rpma
