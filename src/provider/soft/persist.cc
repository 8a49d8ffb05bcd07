#include "provider/soft/persist.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#include "common/log.h"

namespace rpma {

namespace {
// Counters for tests only: relaxed atomics keep a lock off every PERSISTENT flush. calls is
// bumped last with release, so a reader that sees it also sees that call's bytes and range.
std::atomic<uint64_t> g_calls{0};
std::atomic<uint64_t> g_bytes{0};
std::atomic<uintptr_t> g_last_begin{0};
std::atomic<uintptr_t> g_last_end{0};
}  // namespace

int persist_range(char *addr, size_t len) noexcept {
    static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    uintptr_t begin = reinterpret_cast<uintptr_t>(addr) & ~(page - 1);
    uintptr_t end = (reinterpret_cast<uintptr_t>(addr) + len + page - 1) & ~(page - 1);
    if (::msync(reinterpret_cast<void *>(begin), end - begin, MS_SYNC) != 0) {
        RPMA_LOG_ERROR("msync(%p, %zu): %m", reinterpret_cast<void *>(begin),
                       static_cast<size_t>(end - begin));
        return -1;
    }
    g_bytes.fetch_add(end - begin, std::memory_order_relaxed);
    g_last_begin.store(begin, std::memory_order_relaxed);
    g_last_end.store(end, std::memory_order_relaxed);
    g_calls.fetch_add(1, std::memory_order_release);
    return 0;
}

PersistStats persist_stats() noexcept {
    PersistStats s;
    s.calls = g_calls.load(std::memory_order_acquire);
    s.bytes = g_bytes.load(std::memory_order_relaxed);
    s.last_begin = g_last_begin.load(std::memory_order_relaxed);
    s.last_end = g_last_end.load(std::memory_order_relaxed);
    return s;
}

}  // namespace rpma
