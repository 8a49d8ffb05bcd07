// What a listening socket in the engine does when accept runs out of descriptors or memory
// (EMFILE, ENFILE, ENOBUFS, ENOMEM). Its socket stays readable (level-triggered) while
// connections wait in the backlog, so accepting again at once would spin: instead it stops
// polling the socket for a back-off period (10 ms doubling to 1 s) and resumes from the owner's
// timer; connections wait in the kernel's backlog meanwhile. At most one warning a second. Serves
// the tcp listener and the shared-memory offer socket. Engine thread only, like its owner.
#pragma once

#include <cstdint>
#include <memory>

#include "common/fd.h"
#include "provider/soft/engine.h"

namespace rpma {

class AcceptBackoff {
  public:
    // what: what the socket accepts, for the log ("connections", "shared-memory offers").
    AcceptBackoff(Engine *engine, const char *what) noexcept : engine_(engine), what_(what) {}

    // The listening socket and the key it is registered under for `owner` (whose on_timer must
    // call ours): set before the registration (Engine::reserve_key), so the first event finds
    // it. Until then, and after stop(), nothing is paused or resumed.
    void watch(int fd, uint64_t key, std::weak_ptr<Handler> owner) noexcept;
    void stop() noexcept { key_ = 0; }

    // One accept4 (non-blocking, close-on-exec). Invalid when there is nothing to take for now:
    // the backlog is empty, the socket is paused for lack of a resource, or another error
    // (logged). Works while paused too: a caller that needs a connection now may try.
    Fd accept();
    // Stops polling the socket for the next back-off period; the timer resumes it. Also for an
    // owner whose callback threw (out of memory), so that it does not fail again at once.
    void pause(const char *why);
    // From the owner's on_timer: polls the socket again once the pause is over.
    void on_timer() noexcept;

  private:
    Engine *engine_;
    const char *what_;
    int fd_ = -1;
    uint64_t key_ = 0;
    std::weak_ptr<Handler> owner_;
    bool paused_ = false;
    Clock::duration backoff_{};  // the last pause; zero after a successful accept
    Clock::time_point resume_at_;
    Clock::time_point last_report_;
    uint64_t unreported_ = 0;  // failures not logged yet (rate limit)
    uint64_t failures_ = 0;    // since the last successful accept
};

}  // namespace rpma
