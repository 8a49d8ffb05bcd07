// A local memory registration (rpma_mr_local).
#pragma once

#include <algorithm>
#include <memory>

#include "core/peer.h"
#include "provider/provider.h"

namespace rpma {

// The usages upstream librpma registers with IBV_ACCESS_LOCAL_WRITE. A NIC checks local writes
// against it; a local read needs only a region of the same protection domain.
constexpr int kLocalWriteUsage =
    RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_RECV;

class MrLocal {
  public:
    // RPMA_E_PROVIDER, registering nothing, unless [ptr, ptr + size) is mapped, and writable
    // for a usage in kLocalWriteUsage, readable otherwise (core/mem_check.h).
    static int reg(Peer *peer, void *ptr, size_t size, int usage, MrLocal **out);
    ~MrLocal();

    Peer *peer() const noexcept { return peer_; }
    const std::shared_ptr<prov::MemoryRegion> &region() const noexcept { return region_; }
    char *ptr() const noexcept { return region_->addr(); }
    size_t size() const noexcept { return region_->size(); }
    int usage() const noexcept { return region_->usage(); }
    // Registered with LOCAL_WRITE: this peer may write into it (read destination, receive).
    bool local_write() const noexcept { return usage() & kLocalWriteUsage; }
    // A request's local range: [off, off + len) lies in the region. An empty one touches no
    // memory and fits at any offset, as a NIC checks no scatter entry of 0 bytes (nor its lkey:
    // the reference over rxe completes it).
    bool holds(size_t off, size_t len) const noexcept {
        return len == 0 || (off <= size() && len <= size() - off);
    }
    // The address of off; an empty range past the end points at the end.
    char *at(size_t off) const noexcept { return ptr() + std::min(off, size()); }
    void descriptor(void *out) const noexcept;
    int advise(size_t offset, size_t len, int advice, uint32_t flags) const;

  private:
    MrLocal(Peer *peer, std::shared_ptr<prov::MemoryRegion> r) noexcept
        : peer_(peer), region_(std::move(r)) {}
    Peer *peer_;
    std::shared_ptr<prov::MemoryRegion> region_;
};

constexpr int kAllUsage =
    RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC |
    RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
    RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV;

}  // namespace rpma
