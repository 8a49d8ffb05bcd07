// The progress engine: one thread per peer with an epoll set over that peer's sockets. It serves
// the target side (reads, writes, flushes, sends) while the application does nothing, and
// delivers completions and connection events.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/fd.h"

namespace rpma::tcp {

using Clock = std::chrono::steady_clock;

// Something with fds in the engine. Callbacks run on the engine thread only.
class Handler {
  public:
    virtual ~Handler() = default;
    virtual void on_events(int fd, uint32_t events) = 0;
    virtual void on_timer() {}
};

class Engine {
  public:
    Engine();
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    bool ok() const noexcept { return ok_; }

    // Registers fd for events; returns the key for modify(). Any thread.
    uint64_t add(int fd, uint32_t events, std::shared_ptr<Handler> h);
    // Changes the event mask. Any thread.
    void modify(int fd, uint64_t key, uint32_t events) noexcept;
    // Stops delivering events for fd; once it returns no callback for that fd runs any more.
    void remove(uint64_t key);
    // Calls h->on_timer() on the engine thread at or after t.
    void add_timer(Clock::time_point t, std::weak_ptr<Handler> h);
    // Runs fn on the engine thread: async, or sync (returns after fn ran).
    void post(std::function<void()> fn);
    void run_sync(std::function<void()> fn);
    bool in_loop() const noexcept { return std::this_thread::get_id() == thread_.get_id(); }

  private:
    struct Entry {
        int fd;
        std::shared_ptr<Handler> handler;
    };
    void loop();
    void wake() noexcept;
    void run_commands();
    int next_timeout_ms();
    void fire_timers();

    Fd epfd_;
    Fd wakefd_;
    bool ok_ = false;
    std::atomic<bool> stop_{false};
    std::thread thread_;

    std::mutex mu_;  // guards commands_
    std::vector<std::function<void()>> commands_;
    // engine thread only:
    std::unordered_map<uint64_t, Entry> entries_;
    std::multimap<Clock::time_point, std::weak_ptr<Handler>> timers_;
    std::atomic<uint64_t> next_key_{1};
};

}  // namespace rpma::tcp
