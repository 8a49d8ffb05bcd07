#include "core/conn_cfg.h"

#include "common/log.h"

namespace rpma {

const ConnCfg &ConnCfg::defaults() noexcept {
    static const ConnCfg kDefaults;
    return kDefaults;
}

int ConnCfg::set_timeout_ms(int timeout_ms) noexcept {
    if (timeout_ms < 0) {
        RPMA_LOG_ERROR("negative connection timeout: %d ms", timeout_ms);
        return RPMA_E_INVAL;
    }
    timeout_ms_ = timeout_ms;
    return 0;
}

}  // namespace rpma
