// rpma_utils_get_ibv_context, rpma_utils_ibv_context_is_odp_capable
#include "api/shim.h"
#include "provider/provider.h"

using namespace rpma;

RPMA_EXPORT int rpma_utils_get_ibv_context(const char *addr, enum rpma_util_ibv_context_type type,
                                           struct ibv_context **ibv_ctx_ptr) {
    const int t = api::enum_value(type);
    if (!addr || !ibv_ctx_ptr ||
        (t != RPMA_UTIL_IBV_CONTEXT_LOCAL && t != RPMA_UTIL_IBV_CONTEXT_REMOTE))
        return RPMA_E_INVAL;
    return api::guarded([&] { return prov::lookup_device(addr, type, ibv_ctx_ptr); });
}

RPMA_EXPORT int rpma_utils_ibv_context_is_odp_capable(struct ibv_context *ibv_ctx,
                                                      int *is_odp_capable) {
    if (!ibv_ctx || !is_odp_capable) return RPMA_E_INVAL;
    return api::guarded([&] {
        prov::Device *dev = prov::device_from_context(ibv_ctx);
        if (!dev) {
            RPMA_LOG_ERROR("not a device context of this library");
            return RPMA_E_PROVIDER;
        }
        return dev->odp_capable(is_odp_capable);
    });
}
