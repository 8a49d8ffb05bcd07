#include "core/mem_check.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <string>

#include "common/fd.h"
#include "common/log.h"

namespace rpma {

namespace {

struct Mapping {
    uintptr_t lo = 0, hi = 0;
    bool read = false, write = false;
};

// "lo-hi perms ...": false for anything else
bool parse_line(std::string_view line, Mapping *m) noexcept {
    const char *p = line.data(), *end = p + line.size();
    auto r = std::from_chars(p, end, m->lo, 16);
    if (r.ec != std::errc() || r.ptr == end || *r.ptr != '-') return false;
    r = std::from_chars(r.ptr + 1, end, m->hi, 16);
    if (r.ec != std::errc() || end - r.ptr < 3 || *r.ptr != ' ') return false;
    m->read = r.ptr[1] == 'r';
    m->write = r.ptr[2] == 'w';
    return m->lo < m->hi;
}

// The whole file, read before parsing so the check sees one pass over the mappings.
bool read_maps(std::string *out) {
    Fd fd(::open("/proc/self/maps", O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return false;
    char buf[16384];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof(buf));
        if (n == 0) return true;
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        out->append(buf, static_cast<size_t>(n));
    }
}

}  // namespace

MemCheck::Result MemCheck::check_maps(std::string_view maps, uintptr_t addr, size_t len,
                                      bool need_write) noexcept {
    uintptr_t end;
    if (__builtin_add_overflow(addr, len, &end)) return {Fault::kUnmapped, addr};
    uintptr_t cur = addr;  // everything below it is checked
    while (!maps.empty() && cur < end) {
        size_t nl = maps.find('\n');
        std::string_view line = maps.substr(0, nl);
        maps.remove_prefix(nl == std::string_view::npos ? maps.size() : nl + 1);
        Mapping m;
        if (!parse_line(line, &m) || m.hi <= cur) continue;
        if (m.lo > cur) break;  // lines are sorted by address: a hole
        // As get_user_pages checks a VMA: pinned for writing it needs VM_WRITE only (a
        // PROT_WRITE mapping is readable in the page tables anyway), otherwise VM_READ.
        if (need_write ? !m.write : !m.read)
            return {m.read ? Fault::kNotWritable : Fault::kNotReadable, cur};
        cur = m.hi;
    }
    return cur < end ? Result{Fault::kUnmapped, cur} : Result{};
}

MemCheck::Result MemCheck::check(const void *addr, size_t len, bool need_write) {
    auto a = reinterpret_cast<uintptr_t>(addr);
    // The file is read in page-sized pieces; a mapping changed between two of them can show
    // a spurious hole, so a failure counts only when a second reading confirms it.
    Result res;
    for (int attempt = 0; attempt < 2; ++attempt) {
        std::string maps;
        if (!read_maps(&maps)) {
            static std::atomic<bool> warned{false};
            if (!warned.exchange(true))
                RPMA_LOG_WARNING(
                    "cannot read /proc/self/maps (%m); registered memory is not "
                    "validated");
            return {};
        }
        res = check_maps(maps, a, len, need_write);
        if (res.fault == Fault::kNone) break;
    }
    return res;
}

const char *MemCheck::describe(Fault f) noexcept {
    switch (f) {
        case Fault::kNone:
            return "valid";
        case Fault::kUnmapped:
            return "not mapped";
        case Fault::kNotReadable:
            return "not readable";
        case Fault::kNotWritable:
            return "not writable";
    }
    return "invalid";
}

}  // namespace rpma
