// rpma_peer_new, rpma_peer_delete
#include "core/peer.h"

#include "api/shim.h"

using namespace rpma;

RPMA_EXPORT int rpma_peer_new(struct ibv_context *ibv_ctx, struct rpma_peer **peer_ptr) {
    if (!ibv_ctx || !peer_ptr) return RPMA_E_INVAL;
    return api::guarded([&] {
        prov::Device *dev = prov::device_from_context(ibv_ctx);
        if (!dev) {
            RPMA_LOG_ERROR("not a device context from rpma_utils_get_ibv_context");
            return RPMA_E_PROVIDER;
        }
        Peer *p = nullptr;
        int ret = Peer::create(dev, &p);
        if (ret == 0) *peer_ptr = api::handle<rpma_peer>(p);
        return ret;
    });
}

RPMA_EXPORT int rpma_peer_delete(struct rpma_peer **peer_ptr) {
    return api::destroy<Peer>(peer_ptr, [](Peer *p) {
        if (int ret = p->check_process("the peer"))
            return ret;  // its engine thread is the parent's
        if (p->try_retire()) return 0;
        RPMA_LOG_ERROR("the peer is still used by %d registrations, endpoints or connections",
                       p->users());
        return RPMA_E_PROVIDER;  // as ibv_dealloc_pd fails with EBUSY; *peer_ptr is kept
    });
}
