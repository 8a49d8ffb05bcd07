// rpma_peer_cfg_*: argument checks around rpma::PeerCfg.
#include "core/peer_cfg.h"

#include "api/shim.h"

using rpma::PeerCfg;
using rpma::api::destroy;
using rpma::api::guarded;
using rpma::api::handle;
using rpma::api::obj;

RPMA_EXPORT int rpma_peer_cfg_new(struct rpma_peer_cfg **pcfg_ptr) {
    if (pcfg_ptr == nullptr) return RPMA_E_INVAL;
    return guarded([&] {
        *pcfg_ptr = handle<rpma_peer_cfg>(new PeerCfg());
        return 0;
    });
}

RPMA_EXPORT int rpma_peer_cfg_delete(struct rpma_peer_cfg **pcfg_ptr) {
    return destroy<PeerCfg>(pcfg_ptr);
}

RPMA_EXPORT int rpma_peer_cfg_set_direct_write_to_pmem(struct rpma_peer_cfg *pcfg, bool supported) {
    if (pcfg == nullptr) return RPMA_E_INVAL;
    obj<PeerCfg>(pcfg)->set_direct_write_to_pmem(supported);
    return 0;
}

RPMA_EXPORT int rpma_peer_cfg_get_direct_write_to_pmem(const struct rpma_peer_cfg *pcfg,
                                                       bool *supported) {
    if (pcfg == nullptr || supported == nullptr) return RPMA_E_INVAL;
    *supported = obj<PeerCfg>(pcfg)->direct_write_to_pmem();
    return 0;
}

RPMA_EXPORT int rpma_peer_cfg_get_descriptor(const struct rpma_peer_cfg *pcfg, void *desc) {
    if (pcfg == nullptr || desc == nullptr) return RPMA_E_INVAL;
    obj<PeerCfg>(pcfg)->get_descriptor(desc);
    return 0;
}

RPMA_EXPORT int rpma_peer_cfg_get_descriptor_size(const struct rpma_peer_cfg *pcfg,
                                                  size_t *desc_size) {
    if (pcfg == nullptr || desc_size == nullptr) return RPMA_E_INVAL;
    *desc_size = PeerCfg::kDescriptorSize;
    return 0;
}

RPMA_EXPORT int rpma_peer_cfg_from_descriptor(const void *desc, size_t desc_size,
                                              struct rpma_peer_cfg **pcfg_ptr) {
    if (desc == nullptr || pcfg_ptr == nullptr) return RPMA_E_INVAL;
    PeerCfg *cfg = nullptr;
    int ret = PeerCfg::from_descriptor(desc, desc_size, &cfg);
    if (ret == 0) *pcfg_ptr = handle<rpma_peer_cfg>(cfg);
    return ret;
}
