// The progress engine: one thread per peer with an epoll set over that peer's sockets. It serves
// the target side (reads, writes, flushes, sends) while the application does nothing, and
// delivers completions and connection events.
#pragma once

#include <sys/epoll.h>
#include <sys/types.h>

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

#include "common/fd.h"
#include "provider/soft/clock.h"

namespace rpma {

// Something with fds in the engine. Callbacks run on the engine thread only.
class Handler {
  public:
    virtual ~Handler() = default;
    virtual void on_events(int fd, uint32_t events) = 0;
    virtual void on_timer() {}
    // A spinning engine (Engine::keep_spinning) looks at fd without a system call: handle what
    // it holds (spin), or ask for a doorbell again as the spin ends (spin_end).
    virtual void spin(int /*fd*/) {}
    virtual void spin_end(int /*fd*/) {}
    // on_events or on_timer threw (out of memory): the handler's state may be half updated.
    // The engine goes on serving everyone else.
    virtual void on_failure(const char * /*why*/) {}
};

class Engine {
  public:
    Engine();
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    bool ok() const noexcept { return ok_; }
    // True in a forked child: the engine thread exists only in the process that created the
    // engine (owner()), so nothing here may wait for it or touch its epoll set, which the
    // child shares with that process. Cheap enough for the data path.
    bool foreign() const noexcept;
    pid_t owner() const noexcept { return owner_; }
    // 0 in the owner; in a forked child RPMA_E_PROVIDER, logged as "`what` belongs to process
    // N". For the objects that live on this engine (connections, endpoints, requests, peers).
    int check_process(const char *what) const noexcept;

    // In a forked child (foreign()) the calls below do nothing and wait for nothing: add
    // returns 0, run_sync returns without running fn.

    // Registers fd for events; returns the key for modify(). Any thread.
    uint64_t add(int fd, uint32_t events, std::shared_ptr<Handler> h);
    // The same in two steps, for a caller that must know the key before the first event can
    // arrive: a fresh key, then the registration under it (false if it failed).
    uint64_t reserve_key() noexcept { return next_key_++; }
    bool add(int fd, uint32_t events, std::shared_ptr<Handler> h, uint64_t key);
    // Changes the event mask. Any thread.
    void modify(int fd, uint64_t key, uint32_t events) noexcept;
    // Stops delivering events for fd; once it returns no callback for that fd runs any more.
    void remove(uint64_t key);
    // Calls h->on_timer() on the engine thread at or after t.
    void add_timer(Clock::time_point t, std::weak_ptr<Handler> h);
    // Runs fn on the engine thread: async, or sync (returns after fn ran; what fn throws is
    // thrown here).
    void post(std::function<void()> fn);
    void run_sync(std::function<void()> fn);
    bool in_loop() const noexcept {
        return thread_ && std::this_thread::get_id() == thread_->get_id();
    }
    // From on_events or spin only: the handler just did work on a shared-memory doorbell and
    // asks the engine not to sleep for a short while (spin_window): the next request usually
    // follows within microseconds, and a sleeping thread takes several to wake. Meanwhile the
    // engine calls its spin() for that fd each turn, and spin_end() once the window passes
    // without work. Bounded, so an idle engine sleeps again.
    void keep_spinning();
    // From on_events only: the handler served a peer's request from a socket. A socket has no
    // look without a system call, so for spin_window after the last such call the engine
    // waits with epoll_wait(0) rather than sleep: the next request (the flush after a write)
    // is read without a wake-up. Only while it pays: where windows pass without requests, or
    // the engine is preempted while it polls (another thread wants the core, maybe the peer to
    // send the next request), it sleeps again and tries polling later (engine.cc).
    void keep_polling() noexcept;
    bool spins() const noexcept { return spin_window_ > Clock::duration::zero(); }
    // How often the engine looked at its epoll set without sleeping (spinning or polling).
    // Engine thread only (run_sync): for tests and diagnostics.
    uint64_t busy_looks() const noexcept { return busy_looks_; }

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
    // Runs a callback; an exception from it is logged and reported to h (if any).
    template <class F>
    void guarded(Handler *h, F &&f) noexcept;
    bool refuse_foreign(const char *what) const noexcept;

    Fd epfd_;
    Fd wakefd_;
    bool ok_ = false;
    const pid_t owner_;
    std::atomic<bool> stop_{false};
    std::unique_ptr<std::thread> thread_;  // leaked, not joined, in a forked child

    std::mutex mu_;  // guards commands_
    std::vector<std::function<void()>> commands_;
    // engine thread only:
    std::unordered_map<uint64_t, Entry> entries_;
    std::multimap<Clock::time_point, std::weak_ptr<Handler>> timers_;
    std::atomic<uint64_t> next_key_{1};
    void spin_turn(bool last);
    bool spin_on(Clock::time_point *next_look);
    bool polling();
    std::vector<uint64_t> spin_keys_;  // engine thread only, as the four below
    uint64_t current_key_ = 0;         // whose callback runs
    bool spin_more_ = false;           // work was found: move the window on
    unsigned spin_turns_ = 0;
    Clock::time_point spin_until_{};
    bool poll_more_ = false;          // keep_polling was called: move the window on
    Clock::time_point poll_until_{};  // epoll_wait(0) until then; the epoch: not polling
    Clock::time_point poll_since_{};  // the window's start
    Clock::time_point poll_last_{};   // the last look at the clock while polling
    bool poll_idle_ = false;          // the turn since poll_last_ found nothing
    long poll_switches_ = 0;          // this thread's involuntary switches as the window began
    int poll_score_ = 0;              // requests found while polling, less empty windows
    unsigned poll_skips_ = 0;         // requests served without polling since the score fell
    unsigned poll_retry_ = 64;        // how many, before a window is tried again
    uint64_t busy_looks_ = 0;
    Clock::duration spin_window_;
};

}  // namespace rpma
