#include "common/process.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace rpma {

namespace {
std::atomic<pid_t> g_pid{::getpid()};
[[maybe_unused]] const int g_atfork =
    ::pthread_atfork(nullptr, nullptr, [] { g_pid.store(::getpid(), std::memory_order_relaxed); });
}  // namespace

pid_t this_process() noexcept {
    return g_pid.load(std::memory_order_relaxed);
}

}  // namespace rpma
