#include "provider/tcp/engine.h"

#include <sys/eventfd.h>

#include <cerrno>
#include <condition_variable>

#include "core/log.h"

namespace rpma::tcp {

namespace {
constexpr uint64_t kWakeKey = 0;
}

Engine::Engine()
    : epfd_(::epoll_create1(EPOLL_CLOEXEC)), wakefd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
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
    thread_ = std::thread([this] { loop(); });
    ok_ = true;
}

Engine::~Engine() {
    if (thread_.joinable()) {
        stop_ = true;
        wake();
        thread_.join();
    }
}

void Engine::wake() noexcept {
    uint64_t one = 1;
    ssize_t r = ::write(wakefd_.get(), &one, sizeof(one));
    (void)r;  // the counter cannot overflow in practice; a failed wake-up only delays
}

void Engine::post(std::function<void()> fn) {
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
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    post([&] {
        fn();
        std::lock_guard lk(m);
        done = true;
        cv.notify_one();
    });
    std::unique_lock lk(m);
    cv.wait(lk, [&] { return done; });
}

uint64_t Engine::add(int fd, uint32_t events, std::shared_ptr<Handler> h) {
    uint64_t key = next_key_++;
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
    return key;
}

void Engine::modify(int fd, uint64_t key, uint32_t events) noexcept {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = key;
    if (::epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, fd, &ev) != 0 && errno != ENOENT)
        RPMA_LOG_ERROR("epoll_ctl(MOD, %d): %m", fd);
}

void Engine::remove(uint64_t key) {
    if (key == 0) return;
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
    post([this, t, h = std::move(h)] { timers_.emplace(t, h); });
}

void Engine::run_commands() {
    std::vector<std::function<void()>> cmds;
    {
        std::lock_guard lk(mu_);
        cmds.swap(commands_);
    }
    for (auto &c : cmds) c();
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
        if (h) h->on_timer();
    }
}

void Engine::loop() {
    epoll_event evs[64];
    while (!stop_) {
        int n = ::epoll_wait(epfd_.get(), evs, 64, next_timeout_ms());
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
            h->on_events(it->second.fd, evs[i].events);
        }
        run_commands();
        fire_timers();
    }
    // Nothing may be left waiting in run_sync.
    run_commands();
}

}  // namespace rpma::tcp
