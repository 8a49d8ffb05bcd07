// Helpers shared by the extern "C" shims: handle <-> object casts and the exception fence.
#pragma once

#include <librpma.h>

#include <new>

#include "common/log.h"

#define RPMA_EXPORT extern "C" __attribute__((visibility("default")))

namespace rpma::api {

// A C handle is the address of its C++ object; the structs stay incomplete for C callers.
template <class Core, class Handle>
inline Core *obj(Handle *h) noexcept {
    return reinterpret_cast<Core *>(h);
}
template <class Core, class Handle>
inline const Core *obj(const Handle *h) noexcept {
    return reinterpret_cast<const Core *>(h);
}
template <class Handle, class Core>
inline Handle *handle(Core *c) noexcept {
    return reinterpret_cast<Handle *>(c);
}

// Runs the body of an API call; no exception may cross the C boundary.
template <class F>
inline int guarded(F &&body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        RPMA_LOG_ERROR("out of memory");
        return RPMA_E_NOMEM;
    } catch (...) {
        RPMA_LOG_ERROR("unexpected internal exception");
        return RPMA_E_UNKNOWN;
    }
}

}  // namespace rpma::api
