#include "core/mr_descriptor.h"

#include <librpma.h>

#include "common/log.h"

namespace rpma {
namespace {

// Byte by byte, so the layout is the same on any host byte order and needs no alignment.
template <class T>
uint8_t *put_le(uint8_t *p, T v) noexcept {
    for (size_t i = 0; i < sizeof(T); i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
    return p + sizeof(T);
}

template <class T>
const uint8_t *get_le(const uint8_t *p, T *v) noexcept {
    T r = 0;
    for (size_t i = 0; i < sizeof(T); i++) r |= static_cast<T>(p[i]) << (8 * i);
    *v = r;
    return p + sizeof(T);
}

}  // namespace

void encode_mr_descriptor(const MrDescriptor &d, void *out) noexcept {
    uint8_t *p = static_cast<uint8_t *>(out);
    p = put_le(p, d.addr);
    p = put_le(p, d.size);
    p = put_le(p, d.rkey);
    *p = d.usage;
}

int decode_mr_descriptor(const void *in, size_t in_size, MrDescriptor *out) noexcept {
    if (in == nullptr || out == nullptr || in_size < kMrDescriptorSize) {
        RPMA_LOG_ERROR("MR descriptor too short: %zu bytes, %zu needed", in_size,
                       kMrDescriptorSize);
        return RPMA_E_INVAL;
    }
    const uint8_t *p = static_cast<const uint8_t *>(in);
    MrDescriptor d;
    p = get_le(p, &d.addr);
    p = get_le(p, &d.size);
    p = get_le(p, &d.rkey);
    d.usage = *p;
    if (d.usage == 0) {
        RPMA_LOG_ERROR("MR descriptor has no usage");
        return RPMA_E_INVAL;
    }
    *out = d;
    return 0;
}

}  // namespace rpma
