// rpma_mr_remote_*: argument checks around rpma::MrRemote. The local MR calls are in mr.cc.
#include "core/mr_remote.h"

#include "api/shim.h"

using rpma::MrRemote;
using rpma::api::destroy;
using rpma::api::handle;
using rpma::api::obj;

RPMA_EXPORT int rpma_mr_remote_from_descriptor(const void *desc, size_t desc_size,
                                               struct rpma_mr_remote **mr_ptr) {
    if (desc == nullptr || mr_ptr == nullptr) return RPMA_E_INVAL;
    MrRemote *mr = nullptr;
    int ret = MrRemote::from_descriptor(desc, desc_size, &mr);
    if (ret == 0) *mr_ptr = handle<rpma_mr_remote>(mr);
    return ret;
}

RPMA_EXPORT int rpma_mr_remote_get_size(const struct rpma_mr_remote *mr, size_t *size) {
    if (mr == nullptr || size == nullptr) return RPMA_E_INVAL;
    *size = static_cast<size_t>(obj<MrRemote>(mr)->size());
    return 0;
}

RPMA_EXPORT int rpma_mr_remote_get_flush_type(const struct rpma_mr_remote *mr, int *flush_type) {
    if (mr == nullptr || flush_type == nullptr) return RPMA_E_INVAL;
    *flush_type = obj<MrRemote>(mr)->flush_type();
    return 0;
}

RPMA_EXPORT int rpma_mr_remote_delete(struct rpma_mr_remote **mr_ptr) {
    return destroy<MrRemote>(mr_ptr);
}
