#include "core/peer_cfg.h"

#include <librpma.h>

#include <cstdint>
#include <new>

#include "common/log.h"

namespace rpma {

int PeerCfg::from_descriptor(const void *desc, size_t desc_size, PeerCfg **out) noexcept {
    // The size is checked too so that a zero-length descriptor is never read past its end.
    if (desc == nullptr || out == nullptr || desc_size < kDescriptorSize) {
        RPMA_LOG_ERROR("invalid peer_cfg descriptor (desc %p, size %zu)", desc, desc_size);
        return RPMA_E_INVAL;
    }
    // Any non-zero byte means "supported", as a C bool would read it.
    bool direct = *static_cast<const uint8_t *>(desc) != 0;
    PeerCfg *cfg = new (std::nothrow) PeerCfg(direct);
    if (cfg == nullptr) return RPMA_E_NOMEM;
    *out = cfg;
    return 0;
}

void PeerCfg::get_descriptor(void *desc) const noexcept {
    *static_cast<uint8_t *>(desc) = direct_ ? 1 : 0;
}

}  // namespace rpma
