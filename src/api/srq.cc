// rpma_srq_new, _delete, _recv, _get_rcq
#include "core/srq.h"

#include "api/shim.h"
#include "core/mr_local.h"
#include "core/srq_cfg.h"

using namespace rpma;

RPMA_EXPORT int rpma_srq_new(struct rpma_peer *peer, struct rpma_srq_cfg *cfg,
                             struct rpma_srq **srq_ptr) {
    if (!peer || !srq_ptr) return RPMA_E_INVAL;
    return api::guarded([&] {
        const SrqCfg &c = cfg ? *api::obj<SrqCfg>(cfg) : SrqCfg::defaults();
        Srq *s = nullptr;
        int ret = Srq::create(api::obj<Peer>(peer), c, &s);
        if (ret == 0) *srq_ptr = api::handle<rpma_srq>(s);
        return ret;
    });
}

RPMA_EXPORT int rpma_srq_delete(struct rpma_srq **srq_ptr) {
    return api::destroy<Srq>(srq_ptr, [](Srq *s) {
        if (s->users() == 0) return 0;
        RPMA_LOG_ERROR("the SRQ is still used by %d connections or connection requests",
                       s->users());
        return RPMA_E_PROVIDER;  // as ibv_destroy_srq fails with EBUSY; *srq_ptr is kept
    });
}

RPMA_EXPORT int rpma_srq_recv(struct rpma_srq *srq, struct rpma_mr_local *dst, size_t offset,
                              size_t len, const void *op_context) {
    if (!srq || (!dst && (offset != 0 || len != 0))) return RPMA_E_INVAL;
    return api::guarded([&] {
        return api::obj<Srq>(srq)->recv(api::obj<MrLocal>(dst), offset, len,
                                        reinterpret_cast<uintptr_t>(op_context));
    });
}

RPMA_EXPORT int rpma_srq_get_rcq(const struct rpma_srq *srq, struct rpma_cq **rcq_ptr) {
    if (!srq || !rcq_ptr) return RPMA_E_INVAL;
    *rcq_ptr = api::handle<rpma_cq>(api::obj<Srq>(srq)->rcq());
    return 0;
}
