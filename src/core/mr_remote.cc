#include "core/mr_remote.h"

#include <librpma.h>

#include <cstdint>
#include <new>

#include "common/log.h"

namespace rpma {

int MrRemote::from_descriptor(const void *desc, size_t desc_size, MrRemote **out) noexcept {
    MrDescriptor d;
    int ret = decode_mr_descriptor(desc, desc_size, &d);
    if (ret) return ret;
    // mr_reg refuses empty regions and no mapping wraps the address space.
    if (d.size == 0 || d.size - 1 > UINT64_MAX - d.addr) {  // last byte past 2^64 - 1
        RPMA_LOG_ERROR("MR descriptor describes no valid region (addr 0x%llx, size %llu)",
                       static_cast<unsigned long long>(d.addr),
                       static_cast<unsigned long long>(d.size));
        return RPMA_E_NOSUPP;
    }
    MrRemote *mr = new (std::nothrow) MrRemote(d);
    if (mr == nullptr) return RPMA_E_NOMEM;
    *out = mr;
    return 0;
}

int MrRemote::flush_type() const noexcept {
    return d_.usage & (RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
}

}  // namespace rpma
