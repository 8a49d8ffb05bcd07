// The clock of the software providers' timers and deadlines (Engine::add_timer and whatever
// computes a due time): steady time, unless a test has stopped it. A stopped clock reads the
// time the test set until the test moves it on, so a timer's schedule (the park check's
// back-off) is checked by moving time, not by sleeping. Process-wide, as a test seam
// (RankedMutex's wait hook is the other); a relaxed load per read otherwise.
#pragma once

#include <atomic>
#include <chrono>

namespace rpma {

struct Clock {
    using duration = std::chrono::steady_clock::duration;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::steady_clock::time_point;  // mixes with steady time
    static constexpr bool is_steady = true;

    static time_point now() noexcept {
        rep t = stopped_.load(std::memory_order_relaxed);
        return t ? time_point(duration(t)) : std::chrono::steady_clock::now();
    }
    // How long something took on this thread (the engine's polling windows, its preemption
    // test): always real time, whether or not a test stopped the clock.
    static time_point real() noexcept { return std::chrono::steady_clock::now(); }

    // Tests only: the clock reads t from now on (t later than any earlier reading); the epoch
    // lets it run again.
    static void stop_at_for_tests(time_point t) noexcept {
        stopped_.store(t.time_since_epoch().count(), std::memory_order_relaxed);
    }

  private:
    static inline std::atomic<rep> stopped_{0};
};

}  // namespace rpma
