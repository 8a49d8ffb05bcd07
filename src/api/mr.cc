// rpma_mr_reg, rpma_mr_dereg and the local region getters
#include "api/shim.h"
#include "core/mr_descriptor.h"
#include "core/mr_local.h"

using namespace rpma;

RPMA_EXPORT int rpma_mr_reg(struct rpma_peer *peer, void *ptr, size_t size, int usage,
                            struct rpma_mr_local **mr_ptr) {
    if (!peer || !ptr || !mr_ptr || size == 0) return RPMA_E_INVAL;
    return api::guarded([&] {
        MrLocal *mr = nullptr;
        int ret = MrLocal::reg(api::obj<Peer>(peer), ptr, size, usage, &mr);
        if (ret == 0) *mr_ptr = api::handle<rpma_mr_local>(mr);
        return ret;
    });
}

RPMA_EXPORT int rpma_mr_dereg(struct rpma_mr_local **mr_ptr) {
    return api::destroy<MrLocal>(mr_ptr);
}

RPMA_EXPORT int rpma_mr_get_descriptor(const struct rpma_mr_local *mr, void *desc) {
    if (!mr || !desc) return RPMA_E_INVAL;
    api::obj<MrLocal>(mr)->descriptor(desc);
    return 0;
}

RPMA_EXPORT int rpma_mr_get_descriptor_size(const struct rpma_mr_local *mr, size_t *desc_size) {
    if (!mr || !desc_size) return RPMA_E_INVAL;
    *desc_size = kMrDescriptorSize;
    return 0;
}

RPMA_EXPORT int rpma_mr_get_ptr(const struct rpma_mr_local *mr, void **ptr) {
    if (!mr || !ptr) return RPMA_E_INVAL;
    *ptr = api::obj<MrLocal>(mr)->ptr();
    return 0;
}

RPMA_EXPORT int rpma_mr_get_size(const struct rpma_mr_local *mr, size_t *size) {
    if (!mr || !size) return RPMA_E_INVAL;
    *size = api::obj<MrLocal>(mr)->size();
    return 0;
}

RPMA_EXPORT int rpma_mr_advise(struct rpma_mr_local *mr, size_t offset, size_t len, int advice,
                               uint32_t flags) {
    if (!mr) return RPMA_E_INVAL;
    return api::guarded([&] { return api::obj<MrLocal>(mr)->advise(offset, len, advice, flags); });
}
