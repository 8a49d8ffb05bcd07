// The server's side of the shared-memory offers (link.h): an abstract unix socket per listening
// port that takes the clients' offers, holds each one (briefly, bounded) until the listener
// pairs it with its tcp request by token. Only offers from processes of our user and PID
// namespace are kept. Out of descriptors it backs off as the tcp listener does (AcceptBackoff).
// Engine thread only, like the listener that owns it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "common/fd.h"
#include "provider/shm/link.h"
#include "provider/soft/accept_backoff.h"
#include "provider/soft/engine.h"
#include "provider/tcp/upgrade.h"

namespace rpma::shm {

class OfferDesk final : public tcp::UpgradeDesk,
                        public Handler,
                        public std::enable_shared_from_this<OfferDesk> {
  public:
    // nullptr when the socket cannot be had (logged at INFO: connections stay on tcp).
    static std::shared_ptr<OfferDesk> open(Engine *engine, uint16_t port);
    ~OfferDesk() override;

    // The offer that came with this token, reading whatever is queued first (the client sends
    // it before its tcp Hello, so it is there by the time the Hello is). nullptr and *why if
    // none came or it was unusable.
    std::shared_ptr<tcp::UpgradeLink> take(uint64_t token, std::string *why) override;
    // Stops taking offers and drops those held.
    void close() override;

    void on_events(int fd, uint32_t events) override;
    void on_timer() override;
    void on_failure(const char *why) override { backoff_.pause(why); }

  private:
    struct Conn {
        Fd fd;
        uint64_t key = 0;
        Clock::time_point deadline;
    };
    struct Held {
        std::shared_ptr<Link> link;
        std::string why;  // why link is null: the offer was refused
        Clock::time_point deadline;
    };

    explicit OfferDesk(Engine *e) noexcept : engine_(e), backoff_(e, "shared-memory offers") {}
    void accept_all();
    void read(int fd);
    void drop(int fd);

    Engine *engine_;
    Fd lfd_;
    uint64_t lkey_ = 0;
    AcceptBackoff backoff_;
    std::unordered_map<int, Conn> conns_;        // accepted, offer not read yet
    std::unordered_map<uint64_t, Held> offers_;  // by token
};

}  // namespace rpma::shm
