#include "provider/soft/engine.h"

#include <librpma.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <utility>

#include "common/log.h"
#include "common/process.h"

namespace rpma {

namespace {
constexpr uint64_t kWakeKey = 0;

// How long an engine polls after doorbell work before it sleeps again (keep_spinning).
// RPMA_SPIN_US overrides it (0: never spin); docs/shm-provider.md.
Clock::duration spin_window() {
    long us = 50;
    if (const char *e = std::getenv("RPMA_SPIN_US")) {
        char *end = nullptr;
        long v = std::strtol(e, &end, 10);
        if (end != e && *end == '\0' && v >= 0 && v <= 10000) us = v;
    }
    return std::chrono::microseconds(us);
}
}  // namespace

Engine::Engine()
    : epfd_(::epoll_create1(EPOLL_CLOEXEC)),
      wakefd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      owner_(::getpid()),
      spin_window_(spin_window()) {
    if (!epfd_.valid() || !wakefd_.valid()) {
        RPMA_LOG_ERROR("cannot create the progress engine's epoll or eventfd: %m");
        return;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWakeKey;
    if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, wakefd_.get(), &ev) != 0) {
        RPMA_LOG_ERROR("epoll_ctl: %m");
        return;
    }
    thread_ = std::make_unique<std::thread>([this] { loop(); });
    ok_ = true;
}

Engine::~Engine() {
    if (!thread_) return;
    if (foreign()) {
        // The thread lives in the parent only: its handle means nothing here, and destroying
        // a joinable std::thread would end the process.
        (void)thread_.release();
        return;
    }
    stop_ = true;
    wake();
    thread_->join();
}

bool Engine::foreign() const noexcept {
    return this_process() != owner_;
}

int Engine::check_process(const char *what) const noexcept {
    if (!foreign()) return 0;
    RPMA_LOG_ERROR("%s belongs to process %d; a forked child cannot use it", what,
                   static_cast<int>(owner_));
    return RPMA_E_PROVIDER;
}

bool Engine::refuse_foreign(const char *what) const noexcept {
    if (!foreign()) return false;
    RPMA_LOG_WARNING("progress engine of process %d: %s skipped in process %d (a forked child)",
                     static_cast<int>(owner_), what, static_cast<int>(::getpid()));
    return true;
}

void Engine::wake() noexcept {
    uint64_t one = 1;
    ssize_t r = ::write(wakefd_.get(), &one, sizeof(one));
    (void)r;  // the counter cannot overflow in practice; a failed wake-up only delays
}

void Engine::post(std::function<void()> fn) {
    if (refuse_foreign("post")) return;
    {
        std::lock_guard lk(mu_);
        commands_.push_back(std::move(fn));
    }
    wake();
}

void Engine::run_sync(std::function<void()> fn) {
    if (in_loop()) {
        fn();
        return;
    }
    if (refuse_foreign("run_sync")) return;
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr err;
    post([&] {
        try {
            fn();
        } catch (...) {
            err = std::current_exception();  // the caller's to handle; the waiter is released
        }
        std::lock_guard lk(m);
        done = true;
        cv.notify_one();
    });
    std::unique_lock lk(m);
    cv.wait(lk, [&] { return done; });
    if (err) std::rethrow_exception(err);
}

uint64_t Engine::add(int fd, uint32_t events, std::shared_ptr<Handler> h) {
    uint64_t key = reserve_key();
    return add(fd, events, std::move(h), key) ? key : 0;
}

bool Engine::add(int fd, uint32_t events, std::shared_ptr<Handler> h, uint64_t key) {
    if (refuse_foreign("add")) return false;
    run_sync([&] {
        epoll_event ev{};
        ev.events = events;
        ev.data.u64 = key;
        if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
            RPMA_LOG_ERROR("epoll_ctl(ADD, %d): %m", fd);
            key = 0;
            return;
        }
        entries_.emplace(key, Entry{fd, std::move(h)});
    });
    return key != 0;
}

void Engine::modify(int fd, uint64_t key, uint32_t events) noexcept {
    if (refuse_foreign("modify")) return;  // the epoll set is the parent's too
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = key;
    if (::epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, fd, &ev) != 0 && errno != ENOENT)
        RPMA_LOG_ERROR("epoll_ctl(MOD, %d): %m", fd);
}

void Engine::remove(uint64_t key) {
    if (key == 0 || refuse_foreign("remove")) return;
    // Dropping the handler on the engine thread would run its destructor there; hand it back.
    std::shared_ptr<Handler> keep;
    run_sync([&] {
        auto it = entries_.find(key);
        if (it == entries_.end()) return;
        ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, it->second.fd, nullptr);
        keep = std::move(it->second.handler);
        entries_.erase(it);
    });
}

void Engine::add_timer(Clock::time_point t, std::weak_ptr<Handler> h) {
    if (refuse_foreign("add_timer")) return;
    if (in_loop()) {
        timers_.emplace(t, std::move(h));  // the loop computes its next timeout after this
        return;
    }
    post([this, t, h = std::move(h)] { timers_.emplace(t, h); });
}

void Engine::run_commands() {
    std::vector<std::function<void()>> cmds;
    {
        std::lock_guard lk(mu_);
        cmds.swap(commands_);
    }
    for (auto &c : cmds) guarded(nullptr, c);
}

int Engine::next_timeout_ms() {
    if (timers_.empty()) return -1;
    auto d = timers_.begin()->first - Clock::now();
    if (d <= Clock::duration::zero()) return 0;
    return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(d).count());
}

void Engine::fire_timers() {
    auto now = Clock::now();
    while (!timers_.empty() && timers_.begin()->first <= now) {
        auto h = timers_.begin()->second.lock();
        timers_.erase(timers_.begin());
        if (h) guarded(h.get(), [&] { h->on_timer(); });
    }
}

template <class F>
void Engine::guarded(Handler *h, F &&f) noexcept {
    // An allocation failure on this thread must not end the process: the handler that failed
    // deals with it, everyone else is served on.
    const char *why;
    try {
        f();
        return;
    } catch (const std::bad_alloc &) {
        why = "out of memory on the progress thread";
    } catch (const std::exception &) {
        why = "internal error on the progress thread";
    }
    RPMA_LOG_ERROR("%s", why);
    if (!h) return;
    try {
        h->on_failure(why);
    } catch (const std::exception &) {
        RPMA_LOG_ERROR("handling the failure failed too");
    }
}

void Engine::keep_spinning() {
    if (!spins() || !current_key_) return;
    spin_more_ = true;  // the loop moves the window on at its next look at the clock
    if (std::find(spin_keys_.begin(), spin_keys_.end(), current_key_) == spin_keys_.end())
        spin_keys_.push_back(current_key_);
}

void Engine::spin_turn(bool last) {
    // by index and key: a callback may add keys or remove entries
    for (size_t i = 0; i < spin_keys_.size(); ++i) {
        auto it = entries_.find(spin_keys_[i]);
        if (it == entries_.end()) continue;
        auto h = it->second.handler;
        int fd = it->second.fd;
        current_key_ = spin_keys_[i];
        guarded(h.get(), [&] { last ? h->spin_end(fd) : h->spin(fd); });
        current_key_ = 0;
    }
}

// While spinning: true if this turn goes on spinning without the epoll set. The clock is read
// every 16th turn only (it is most of a turn's cost otherwise), and the epoll set (other fds,
// posted commands, timers) once per spin window, at most 50 us apart.
bool Engine::spin_on(Clock::time_point *next_look) {
    if ((++spin_turns_ & 15) != 0) {
        spin_turn(false);
        return true;
    }
    auto now = Clock::real();
    if (std::exchange(spin_more_, false)) spin_until_ = now + spin_window_;
    if (now >= spin_until_) {
        spin_turn(true);  // may find input and spin on (spin_more_)
        if (!spin_more_) spin_keys_.clear();
        return true;
    }
    if (now < *next_look) {
        spin_turn(false);
        return true;
    }
    *next_look = now + std::min<Clock::duration>(spin_window_, std::chrono::microseconds(50));
    return false;
}

// keep_polling's bookkeeping. Polling pays only while requests come within the window and no
// other thread wants this core (the peer's next request may need it to be sent). So a request
// found while polling scores 1 (up to kPollScoreMax); a window that passes without one costs 2;
// an empty turn that took longer than kPollPreempted ends the window and the score goes below 0
// where the scheduler gave this thread's core to another thread meanwhile (an involuntary switch
// since the window began: the core is wanted). A slow turn without one (a VM's vCPU the
// hypervisor ran something else on, a long interrupt) says nothing about this machine's cores,
// and the window goes on. Below 0 the engine wakes per request
// again and tries one window after poll_retry_ requests, which doubles with each such try (up to
// kPollRetryMax) and goes back to kPollRetryMin once a window has run kPollProven.
namespace {
constexpr int kPollScoreMax = 8;
constexpr unsigned kPollRetryMin = 64;
constexpr unsigned kPollRetryMax = 4096;
constexpr auto kPollPreempted = std::chrono::microseconds(50);
constexpr auto kPollProven = std::chrono::milliseconds(10);

// How often the scheduler took the core from this thread so far (read once per window and on
// a slow turn only: a system call).
long involuntary_switches() noexcept {
    rusage ru{};
    return ::getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
}
}  // namespace

void Engine::keep_polling() noexcept {
    if (!spins()) return;
    if (poll_until_ != Clock::time_point{}) {  // found while polling
        poll_score_ = std::min(poll_score_ + 1, kPollScoreMax);
        poll_more_ = true;  // the loop moves the window on at its next look at the clock
        if (poll_last_ - poll_since_ > kPollProven) poll_retry_ = kPollRetryMin;
        return;
    }
    if (poll_score_ < 0) {
        if (++poll_skips_ < poll_retry_) return;
        poll_skips_ = 0;
        poll_score_ = 0;
        poll_retry_ = std::min(poll_retry_ * 2, kPollRetryMax);  // unless this window proves itself
    }
    poll_since_ = poll_last_ = Clock::real();
    poll_until_ = poll_since_ + spin_window_;
    poll_idle_ = false;
    poll_switches_ = involuntary_switches();
}

bool Engine::polling() {
    if (poll_until_ == Clock::time_point{}) return false;
    auto now = Clock::real();
    bool preempted = std::exchange(poll_idle_, false) && now - poll_last_ > kPollPreempted &&
                     involuntary_switches() != poll_switches_;
    poll_last_ = now;
    if (std::exchange(poll_more_, false)) poll_until_ = now + spin_window_;
    if (!preempted && now < poll_until_) return true;
    poll_until_ = {};
    poll_score_ = preempted ? -1 : poll_score_ - 2;
    return false;
}

void Engine::loop() {
    Clock::time_point next_look{};
    epoll_event evs[64];
    while (!stop_) {
        if (!spin_keys_.empty() && spin_on(&next_look)) continue;
        bool spin = !spin_keys_.empty() || polling();
        busy_looks_ += spin;
        int n = ::epoll_wait(epfd_.get(), evs, 64, spin ? 0 : next_timeout_ms());
        if (spin && n == 0) {
            poll_idle_ = spin_keys_.empty();  // the next look times this turn (polling)
            spin_turn(false);
            fire_timers();
            continue;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            RPMA_LOG_FATAL("epoll_wait: %m");
            break;
        }
        for (int i = 0; i < n; ++i) {
            uint64_t key = evs[i].data.u64;
            if (key == kWakeKey) {
                uint64_t v;
                ssize_t r = ::read(wakefd_.get(), &v, sizeof(v));
                (void)r;
                continue;
            }
            auto it = entries_.find(key);
            if (it == entries_.end()) continue;  // removed earlier in this batch
            auto h = it->second.handler;         // keeps it alive through the call
            int fd = it->second.fd;
            current_key_ = key;
            guarded(h.get(), [&] { h->on_events(fd, evs[i].events); });
            current_key_ = 0;
        }
        run_commands();
        fire_timers();
    }
    // Nothing may be left waiting in run_sync.
    run_commands();
}

}  // namespace rpma
