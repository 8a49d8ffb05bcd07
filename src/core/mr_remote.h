// A remote memory region (rpma_mr_remote): the decoded descriptor of a peer's registration.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/mr_descriptor.h"

namespace rpma {

class MrRemote {
  public:
    explicit MrRemote(const MrDescriptor &d) noexcept : d_(d) {}

    // Decodes a descriptor: RPMA_E_INVAL as decode_mr_descriptor does, RPMA_E_NOSUPP when the
    // fields cannot describe a registered region (size 0, or addr + size past 2^64),
    // RPMA_E_NOMEM. *out is set only on success.
    static int from_descriptor(const void *desc, size_t desc_size, MrRemote **out) noexcept;

    uint64_t addr() const noexcept { return d_.addr; }
    uint64_t size() const noexcept { return d_.size; }
    uint32_t rkey() const noexcept { return d_.rkey; }
    int usage() const noexcept { return d_.usage; }
    // The RPMA_MR_USAGE_FLUSH_TYPE_* bits of the usage.
    int flush_type() const noexcept;

  private:
    MrDescriptor d_;
};

}  // namespace rpma
