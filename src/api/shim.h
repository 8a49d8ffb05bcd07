// Helpers shared by the extern "C" shims: handle <-> object casts and the exception fence.
#pragma once

#include <librpma.h>

#include <cstring>
#include <exception>
#include <new>
#include <type_traits>

#include "common/cancel.h"
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

// What a C caller passed for an enum parameter, read as the int it is in the C ABI: any int is a
// valid C value, but outside the enumerators' range it is undefined as a C++ enum, so a check
// that compares the enum itself is not allowed to see it.
template <class E>
inline int enum_value(const E &e) noexcept {
    static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int));
    int v;
    std::memcpy(&v, &e, sizeof(v));
    return v;
}

// Runs the body of an API call; no exception may cross the C boundary. Thread cancellation is
// off meanwhile (common/cancel.h): no unwind can start inside.
template <class F>
inline int guarded(F &&body) noexcept {
    CancelOff off;
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

// The same for a blocking call (rpma_cq_wait, rpma_conn_wait, rpma_conn_next_event,
// rpma_ep_next_conn_req), whose wait keeps the caller's cancellation setting: the unwind that
// pthread_cancel starts there must go on through this frame, so only the library's own
// exceptions are caught (catching everything would also stop glibc's abi::__forced_unwind).
template <class F>
inline int guarded_wait(F &&body) {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        RPMA_LOG_ERROR("out of memory");
        return RPMA_E_NOMEM;
    } catch (const std::exception &) {
        RPMA_LOG_ERROR("unexpected internal exception");
        return RPMA_E_UNKNOWN;
    }
}

// The shape of every *_delete, *_dereg and *_shutdown: RPMA_E_INVAL for a null ptr, 0 for a null
// *ptr, else `refuse(Core *)` may keep the object (a nonzero error, *ptr kept); otherwise *ptr is
// cleared and the object deleted, inside guarded().
template <class Core, class Handle, class Refuse>
inline int destroy(Handle **ptr, Refuse &&refuse) noexcept {
    if (!ptr) return RPMA_E_INVAL;
    if (!*ptr) return 0;
    return guarded([&] {
        Core *o = obj<Core>(*ptr);
        if (int ret = refuse(o)) return ret;
        *ptr = nullptr;
        delete o;
        return 0;
    });
}
// The same for a delete whose man page clears *ptr on failure too: a refused object is abandoned
// (*ptr cleared, the object kept). For a forked child's copy of its parent's object, which
// must not be deleted: that would act on sockets the parent still uses.
template <class Core, class Handle, class Refuse>
inline int destroy_or_abandon(Handle **ptr, Refuse &&refuse) noexcept {
    if (!ptr) return RPMA_E_INVAL;
    if (!*ptr) return 0;
    if (int ret = refuse(obj<Core>(*ptr))) {
        *ptr = nullptr;
        return ret;
    }
    return destroy<Core>(ptr, [](Core *) { return 0; });
}
template <class Core, class Handle>
inline int destroy(Handle **ptr) noexcept {
    return destroy<Core>(ptr, [](Core *) { return 0; });
}

}  // namespace rpma::api
