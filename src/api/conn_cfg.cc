// rpma_conn_cfg_*: argument checks around rpma::ConnCfg.
#include "core/conn_cfg.h"

#include "api/shim.h"

using rpma::ConnCfg;
using rpma::api::destroy;
using rpma::api::guarded;
using rpma::api::handle;
using rpma::api::obj;

RPMA_EXPORT int rpma_conn_cfg_new(struct rpma_conn_cfg **cfg_ptr) {
    if (cfg_ptr == nullptr) return RPMA_E_INVAL;
    return guarded([&] {
        *cfg_ptr = handle<rpma_conn_cfg>(new ConnCfg());
        return 0;
    });
}

RPMA_EXPORT int rpma_conn_cfg_delete(struct rpma_conn_cfg **cfg_ptr) {
    return destroy<ConnCfg>(cfg_ptr);
}

RPMA_EXPORT int rpma_conn_cfg_set_timeout(struct rpma_conn_cfg *cfg, int timeout_ms) {
    if (cfg == nullptr) return RPMA_E_INVAL;
    return obj<ConnCfg>(cfg)->set_timeout_ms(timeout_ms);
}

RPMA_EXPORT int rpma_conn_cfg_get_timeout(const struct rpma_conn_cfg *cfg, int *timeout_ms) {
    if (cfg == nullptr || timeout_ms == nullptr) return RPMA_E_INVAL;
    *timeout_ms = obj<ConnCfg>(cfg)->timeout_ms();
    return 0;
}

RPMA_EXPORT int rpma_conn_cfg_set_cq_size(struct rpma_conn_cfg *cfg, uint32_t cq_size) {
    if (cfg == nullptr) return RPMA_E_INVAL;
    obj<ConnCfg>(cfg)->set_cq_size(cq_size);
    return 0;
}

RPMA_EXPORT int rpma_conn_cfg_get_cq_size(const struct rpma_conn_cfg *cfg, uint32_t *cq_size) {
    if (cfg == nullptr || cq_size == nullptr) return RPMA_E_INVAL;
    *cq_size = obj<ConnCfg>(cfg)->cq_size();
    return 0;
}

RPMA_EXPORT int rpma_conn_cfg_set_rcq_size(struct rpma_conn_cfg *cfg, uint32_t rcq_size) {
    if (cfg == nullptr) return RPMA_E_INVAL;
    obj<ConnCfg>(cfg)->set_rcq_size(rcq_size);
    return 0;
}

RPMA_EXPORT int rpma_conn_cfg_get_rcq_size(const struct rpma_conn_cfg *cfg, uint32_t *rcq_size) {
    if (cfg == nullptr || rcq_size == nullptr) return RPMA_E_INVAL;
    *rcq_size = obj<ConnCfg>(cfg)->rcq_size();
    return 0;
}

RPMA_EXPORT int rpma_conn_cfg_set_sq_size(struct rpma_conn_cfg *cfg, uint32_t sq_size) {
    if (cfg == nullptr) return RPMA_E_INVAL;
    obj<ConnCfg>(cfg)->set_sq_size(sq_size);
    return 0;
}

RPMA_EXPORT int rpma_conn_cfg_get_sq_size(const struct rpma_conn_cfg *cfg, uint32_t *sq_size) {
    if (cfg == nullptr || sq_size == nullptr) return RPMA_E_INVAL;
    *sq_size = obj<ConnCfg>(cfg)->sq_size();
    return 0;
}

RPMA_EXPORT int rpma_conn_cfg_set_rq_size(struct rpma_conn_cfg *cfg, uint32_t rq_size) {
    if (cfg == nullptr) return RPMA_E_INVAL;
    obj<ConnCfg>(cfg)->set_rq_size(rq_size);
    return 0;
}

RPMA_EXPORT int rpma_conn_cfg_get_rq_size(const struct rpma_conn_cfg *cfg, uint32_t *rq_size) {
    if (cfg == nullptr || rq_size == nullptr) return RPMA_E_INVAL;
    *rq_size = obj<ConnCfg>(cfg)->rq_size();
    return 0;
}

RPMA_EXPORT int rpma_conn_cfg_set_compl_channel(struct rpma_conn_cfg *cfg, bool shared) {
    if (cfg == nullptr) return RPMA_E_INVAL;
    obj<ConnCfg>(cfg)->set_shared_channel(shared);
    return 0;
}

RPMA_EXPORT int rpma_conn_cfg_get_compl_channel(const struct rpma_conn_cfg *cfg, bool *shared) {
    if (cfg == nullptr || shared == nullptr) return RPMA_E_INVAL;
    *shared = obj<ConnCfg>(cfg)->shared_channel();
    return 0;
}

RPMA_EXPORT int rpma_conn_cfg_set_srq(struct rpma_conn_cfg *cfg, struct rpma_srq *srq) {
    if (cfg == nullptr) return RPMA_E_INVAL;
    obj<ConnCfg>(cfg)->set_srq(srq);
    return 0;
}

RPMA_EXPORT int rpma_conn_cfg_get_srq(const struct rpma_conn_cfg *cfg, struct rpma_srq **srq_ptr) {
    if (cfg == nullptr || srq_ptr == nullptr) return RPMA_E_INVAL;
    *srq_ptr = obj<ConnCfg>(cfg)->srq();
    return 0;
}
