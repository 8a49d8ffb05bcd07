#include "core/mr_local.h"

#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "core/mem_check.h"
#include "core/mr_descriptor.h"

namespace rpma {

int MrLocal::reg(Peer *peer, void *ptr, size_t size, int usage, MrLocal **out) {
    if (usage == 0 || (usage & ~kAllUsage)) {
        RPMA_LOG_ERROR("invalid usage 0x%x", usage);
        return RPMA_E_INVAL;
    }
    // Usages for which ibv_reg_mr asks for LOCAL_WRITE or REMOTE_WRITE need writable memory.
    // Upstream librpma asks LOCAL_WRITE for WRITE_SRC as well, so read-only memory fails there.
    bool write = usage & kLocalWriteUsage;
    auto chk = MemCheck::check(ptr, size, write);
    if (chk.fault != MemCheck::Fault::kNone) {
        RPMA_LOG_ERROR("cannot register [%p, +%zu) with usage 0x%x: memory at %p is %s", ptr, size,
                       usage, reinterpret_cast<void *>(chk.at), MemCheck::describe(chk.fault));
        return RPMA_E_PROVIDER;  // as ibv_reg_mr fails with EFAULT
    }
    std::shared_ptr<prov::MemoryRegion> region;
    if (int ret = peer->domain().register_memory(static_cast<char *>(ptr), size, usage, &region))
        return ret;
    auto *mr = new (std::nothrow) MrLocal(peer, region);
    if (!mr) {
        peer->domain().deregister(region);
        return RPMA_E_NOMEM;
    }
    peer->ref();
    *out = mr;
    return 0;
}

MrLocal::~MrLocal() {
    peer_->domain().deregister(region_);
    peer_->unref();
}

void MrLocal::descriptor(void *out) const noexcept {
    MrDescriptor d{reinterpret_cast<uintptr_t>(region_->addr()), region_->size(), region_->rkey(),
                   static_cast<uint8_t>(region_->usage())};
    encode_mr_descriptor(d, out);
}

int MrLocal::advise(size_t offset, size_t len, int advice, uint32_t flags) const {
    if (offset > size() || len > size() - offset) {
        RPMA_LOG_ERROR("advice range [%zu, +%zu) outside the region of %zu bytes", offset, len,
                       size());
        return RPMA_E_INVAL;
    }
    if (flags & ~static_cast<uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) {
        RPMA_LOG_ERROR("invalid advice flags 0x%x", flags);
        return RPMA_E_INVAL;
    }
    switch (advice) {
        case IBV_ADVISE_MR_ADVICE_PREFETCH:
        case IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT:
            break;
        case IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE:
            if (!(usage() &
                  (RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_RECV))) {
                RPMA_LOG_ERROR("PREFETCH_WRITE advice on a region that is never written");
                return RPMA_E_INVAL;
            }
            break;
        default:
            RPMA_LOG_ERROR("unknown advice %d", advice);
            return RPMA_E_NOSUPP;
    }
    return peer_->domain().advise(*region_, ptr() + offset, len, advice, flags);
}

}  // namespace rpma
