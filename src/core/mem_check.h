// Validates memory for a registration as ibv_reg_mr does when it pins the pages (EFAULT there):
// every byte of the range must be mapped, and writable when the registration may be written into
// (a PROT_WRITE-only mapping will do: the page tables make it readable too), readable otherwise.
// The provider touches registered memory from the CPU, so without this a remote write into
// read-only or unmapped memory would crash the target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rpma {

class MemCheck {
  public:
    enum class Fault { kNone, kUnmapped, kNotReadable, kNotWritable };
    struct Result {
        Fault fault = Fault::kNone;
        uintptr_t at = 0;  // the first address that fails
    };

    // Checks [addr, addr + len) against this process's mappings (/proc/self/maps). Where that
    // file cannot be read the memory is not validated (logged once).
    static Result check(const void *addr, size_t len, bool need_write);
    // The same against the text of a maps file; adjacent mappings merge, out-of-order or
    // repeated lines (a concurrent change while the file was read) are tolerated.
    static Result check_maps(std::string_view maps, uintptr_t addr, size_t len,
                             bool need_write) noexcept;
    static const char *describe(Fault f) noexcept;
};

}  // namespace rpma
