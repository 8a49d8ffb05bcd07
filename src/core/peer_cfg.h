// Peer configuration (rpma_peer_cfg): what the remote side may assume about this peer's memory.
#pragma once

#include <cstddef>

namespace rpma {

class PeerCfg {
  public:
    // The descriptor is one byte: 1 when direct write to PMEM is supported, else 0.
    static constexpr size_t kDescriptorSize = 1;

    PeerCfg() = default;
    explicit PeerCfg(bool direct_write_to_pmem) noexcept : direct_(direct_write_to_pmem) {}

    // RPMA_E_INVAL when desc is NULL or shorter than kDescriptorSize, RPMA_E_NOMEM when the
    // object cannot be allocated; *out is set only on success.
    static int from_descriptor(const void *desc, size_t desc_size, PeerCfg **out) noexcept;

    bool direct_write_to_pmem() const noexcept { return direct_; }
    void set_direct_write_to_pmem(bool supported) noexcept { direct_ = supported; }

    // Writes kDescriptorSize bytes.
    void get_descriptor(void *desc) const noexcept;

  private:
    bool direct_ = false;
};

}  // namespace rpma
