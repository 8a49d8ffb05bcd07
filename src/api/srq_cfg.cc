// rpma_srq_cfg_*: argument checks around rpma::SrqCfg.
#include "core/srq_cfg.h"

#include "api/shim.h"

using rpma::SrqCfg;
using rpma::api::destroy;
using rpma::api::guarded;
using rpma::api::handle;
using rpma::api::obj;

RPMA_EXPORT int rpma_srq_cfg_new(struct rpma_srq_cfg **cfg_ptr) {
    if (cfg_ptr == nullptr) return RPMA_E_INVAL;
    return guarded([&] {
        *cfg_ptr = handle<rpma_srq_cfg>(new SrqCfg());
        return 0;
    });
}

RPMA_EXPORT int rpma_srq_cfg_delete(struct rpma_srq_cfg **cfg_ptr) {
    return destroy<SrqCfg>(cfg_ptr);
}

RPMA_EXPORT int rpma_srq_cfg_set_rq_size(struct rpma_srq_cfg *cfg, uint32_t rq_size) {
    if (cfg == nullptr) return RPMA_E_INVAL;
    obj<SrqCfg>(cfg)->set_rq_size(rq_size);
    return 0;
}

RPMA_EXPORT int rpma_srq_cfg_get_rq_size(const struct rpma_srq_cfg *cfg, uint32_t *rq_size) {
    if (cfg == nullptr || rq_size == nullptr) return RPMA_E_INVAL;
    *rq_size = obj<SrqCfg>(cfg)->rq_size();
    return 0;
}

RPMA_EXPORT int rpma_srq_cfg_set_rcq_size(struct rpma_srq_cfg *cfg, uint32_t rcq_size) {
    if (cfg == nullptr) return RPMA_E_INVAL;
    obj<SrqCfg>(cfg)->set_rcq_size(rcq_size);
    return 0;
}

RPMA_EXPORT int rpma_srq_cfg_get_rcq_size(const struct rpma_srq_cfg *cfg, uint32_t *rcq_size) {
    if (cfg == nullptr || rcq_size == nullptr) return RPMA_E_INVAL;
    *rcq_size = obj<SrqCfg>(cfg)->rcq_size();
    return 0;
}
