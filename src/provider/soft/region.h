// A registered memory region as the transport sees it. The responder touches region memory only
// inside a RegionUse, and deregistration waits for those to end, so a region that the application
// deregisters (and maybe unmaps) is never accessed afterwards.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "provider/provider.h"

namespace rpma {

class Region final : public prov::MemoryRegion {
  public:
    Region(char *addr, size_t size, int usage, uint32_t rkey) noexcept
        : MemoryRegion(addr, size, usage, rkey) {}

    // True if [addr, addr + len) lies inside the region; overflow-safe.
    bool contains(uint64_t addr, uint64_t len) const noexcept {
        uint64_t base = reinterpret_cast<uintptr_t>(this->addr());
        return addr >= base && len <= size() && addr - base <= size() - len;
    }

    bool acquire() noexcept;
    void release() noexcept { users_.fetch_sub(1); }
    // Marks the region dead and waits until no one is inside a RegionUse.
    void kill() noexcept;

  private:
    std::atomic<int> users_{0};
    std::atomic<bool> dead_{false};
};

// Scoped access to a region's memory; ok() is false once the region is deregistered.
class RegionUse {
  public:
    explicit RegionUse(Region *r) noexcept : r_(r && r->acquire() ? r : nullptr) {}
    ~RegionUse() {
        if (r_) r_->release();
    }
    RegionUse(const RegionUse &) = delete;
    RegionUse &operator=(const RegionUse &) = delete;
    bool ok() const noexcept { return r_ != nullptr; }

  private:
    Region *r_;
};

}  // namespace rpma
