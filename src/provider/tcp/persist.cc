#include "provider/tcp/persist.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "common/log.h"

namespace rpma::tcp {

namespace {
std::mutex g_mu;
PersistStats g_stats{};
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
    std::lock_guard lk(g_mu);
    g_stats.calls++;
    g_stats.bytes += end - begin;
    g_stats.last_begin = begin;
    g_stats.last_end = end;
    return 0;
}

PersistStats persist_stats() noexcept {
    std::lock_guard lk(g_mu);
    return g_stats;
}

}  // namespace rpma::tcp
