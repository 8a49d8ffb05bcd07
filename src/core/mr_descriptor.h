// The network form of a memory region, exchanged between peers (e.g. in private data).
#pragma once

#include <cstddef>
#include <cstdint>

namespace rpma {

// addr u64, size u64, rkey u32, usage u8: little-endian and packed.
constexpr size_t kMrDescriptorSize = 21;

struct MrDescriptor {
    uint64_t addr;
    uint64_t size;
    uint32_t rkey;
    uint8_t usage;  // the registrant's full RPMA_MR_USAGE_* mask
};

// Writes exactly kMrDescriptorSize bytes to out.
void encode_mr_descriptor(const MrDescriptor &d, void *out) noexcept;

// RPMA_E_INVAL when in is NULL, in_size < kMrDescriptorSize or the usage is 0; *out is
// written only on success. Bytes past the first kMrDescriptorSize are ignored.
int decode_mr_descriptor(const void *in, size_t in_size, MrDescriptor *out) noexcept;

}  // namespace rpma
