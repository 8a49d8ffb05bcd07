// The regions registered on one peer, by rkey. rkeys are random and unique among live regions.
#pragma once

#include <memory>
#include <random>
#include <shared_mutex>
#include <unordered_map>

#include "provider/soft/region.h"

namespace rpma {

class MrTable {
  public:
    // Registers a region under a fresh random rkey.
    std::shared_ptr<Region> add(char *addr, size_t size, int usage);
    // Registers under a chosen rkey (test harnesses); nullptr if it is taken or 0.
    std::shared_ptr<Region> add_with_rkey(char *addr, size_t size, int usage, uint32_t rkey);
    std::shared_ptr<Region> find(uint32_t rkey) const;
    void remove(uint32_t rkey);

  private:
    mutable std::shared_mutex mu_;
    std::unordered_map<uint32_t, std::shared_ptr<Region>> regions_;
    std::mt19937 rng_{std::random_device{}()};
};

}  // namespace rpma
