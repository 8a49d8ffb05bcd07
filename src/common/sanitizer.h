// Which sanitizer the build runs under, for the few places that must show it an order it cannot
// see by itself, and the tests it cannot run.
#pragma once

namespace rpma {

#ifdef __has_feature  // clang, and GCC from 14; older GCC defines __SANITIZE_*__ only
#define RPMA_HAS_FEATURE(x) __has_feature(x)
#else
#define RPMA_HAS_FEATURE(x) 0
#endif

#if defined(__SANITIZE_THREAD__) || RPMA_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

#if defined(__SANITIZE_ADDRESS__) || RPMA_HAS_FEATURE(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

#undef RPMA_HAS_FEATURE

}  // namespace rpma
