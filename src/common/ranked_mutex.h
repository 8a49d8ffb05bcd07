// A mutex with a rank in a fixed lock order: a thread may take a mutex only while it holds
// none of the same or a higher rank. Builds with RPMA_CHECK_LOCK_ORDER (Debug and sanitizer
// builds) check that on every lock and abort on a violation, naming both ranks, instead of
// deadlocking one day under the right timing.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace rpma {

class RankedMutex {
  public:
    explicit RankedMutex(unsigned rank) noexcept : rank_(rank) {}
    RankedMutex(const RankedMutex &) = delete;
    RankedMutex &operator=(const RankedMutex &) = delete;

    void lock() {
        check();
        if (!mu_.try_lock()) {
            if (WaitHook h = wait_hook_.load(std::memory_order_acquire)) h(this);
            mu_.lock();
        }
        hold();
    }
    bool try_lock() {
        check();
        if (!mu_.try_lock()) return false;
        hold();
        return true;
    }
    void unlock() {
        release();
        mu_.unlock();
    }

    // A test seam: h runs on a thread whose lock() found the mutex held, just before it waits
    // for it, so a test can drive an interleaving by handshakes rather than sleeps (nullptr:
    // none). Process-wide; costs an atomic load on the contended path only.
    using WaitHook = void (*)(const RankedMutex *);
    static void set_wait_hook(WaitHook h) noexcept {
        wait_hook_.store(h, std::memory_order_release);
    }

  private:
    static inline std::atomic<WaitHook> wait_hook_{nullptr};
#ifdef RPMA_CHECK_LOCK_ORDER
    static inline thread_local uint32_t held_ = 0;  // a bit per rank held
    void check() const noexcept {
        if (held_ >> rank_) {
            std::fprintf(stderr, "rpma: lock order violated: rank %u taken while holding 0x%x\n",
                         rank_, held_);
            std::abort();
        }
    }
    void hold() noexcept {
        held_ |= 1u << rank_;
    }
    void release() noexcept {
        held_ &= ~(1u << rank_);
    }
#else
    void check() const noexcept {}
    void hold() noexcept {}
    void release() noexcept {}
#endif
    [[maybe_unused]] unsigned rank_;  // read only by the check
    std::mutex mu_;
};

}  // namespace rpma
