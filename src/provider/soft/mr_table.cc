#include "provider/soft/mr_table.h"

#include <mutex>

namespace rpma {

std::shared_ptr<Region> MrTable::add(char *addr, size_t size, int usage) {
    std::unique_lock lk(mu_);
    uint32_t rkey;
    do {
        rkey = static_cast<uint32_t>(rng_());
    } while (rkey == 0 || regions_.count(rkey));  // 0 is what zero-length operations carry
    auto r = std::make_shared<Region>(addr, size, usage, rkey);
    regions_.emplace(rkey, r);
    return r;
}

std::shared_ptr<Region> MrTable::add_with_rkey(char *addr, size_t size, int usage, uint32_t rkey) {
    std::unique_lock lk(mu_);
    if (rkey == 0 || regions_.count(rkey)) return nullptr;
    auto r = std::make_shared<Region>(addr, size, usage, rkey);
    regions_.emplace(rkey, r);
    return r;
}

std::shared_ptr<Region> MrTable::find(uint32_t rkey) const {
    std::shared_lock lk(mu_);
    auto it = regions_.find(rkey);
    return it == regions_.end() ? nullptr : it->second;
}

void MrTable::remove(uint32_t rkey) {
    std::unique_lock lk(mu_);
    regions_.erase(rkey);
}

}  // namespace rpma
