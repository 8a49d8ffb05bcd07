// The listening side of the tcp CM: accepts TCP connections, reads each one's Hello within a
// deadline, pairs a connection's two streams by token, and queues complete requests for
// rpma_ep_next_conn_req. Sockets that stay silent or speak nonsense are closed. When accept runs
// out of descriptors or memory the listener backs off instead of spinning (AcceptBackoff). With
// a StreamUpgrade (upgrade.h) it also takes the clients' offers to move off tcp.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/fd.h"
#include "common/fd_queue.h"
#include "provider/provider.h"
#include "provider/soft/accept_backoff.h"
#include "provider/soft/engine.h"
#include "provider/tcp/hello_reader.h"
#include "provider/tcp/upgrade.h"
#include "provider/tcp/wire.h"

namespace rpma::tcp {

struct IncomingConn {
    Fd main;
    Fd join;
    uint32_t qp_num = 0;
    std::vector<uint8_t> pdata;
    std::shared_ptr<UpgradeLink> upgrade;  // the client's offer, taken: accept moves onto it

    // The client ended a stream before the answer: it gave up on the request (deleted its
    // connection, or its process ended). Known only once its end has reached this host.
    bool client_gone() const;
};

// A request taken from the listener; rejected when destroyed unaccepted.
class Incoming final : public prov::IncomingRequest {
  public:
    explicit Incoming(IncomingConn c) noexcept : conn(std::move(c)) {}
    ~Incoming() override;
    const std::vector<uint8_t> &private_data() const noexcept override { return conn.pdata; }
    IncomingConn conn;
};

class Listener final : public prov::Listener,
                       public Handler,
                       public std::enable_shared_from_this<Listener> {
  public:
    // upgrade: takes offers off tcp (nullptr: none).
    static int create(Engine *engine, StreamUpgrade *upgrade, const char *addr, const char *port,
                      std::shared_ptr<Listener> *out);
    ~Listener() override;

    int fd() const noexcept override { return requests_.fd(); }
    std::unique_ptr<prov::IncomingRequest> next() override;
    // Stops listening and refuses every request not taken yet. Not from the engine thread.
    void close() override;

    void on_events(int fd, uint32_t events) override;
    void on_timer() override;
    void on_failure(const char *why) override { backoff_.pause(why); }

  private:
    struct Pending {
        Fd fd;
        uint64_t key = 0;
        HelloReader reader;
        Clock::time_point deadline;
    };
    struct Half {
        Fd main, join;
        uint32_t qp_num = 0;
        std::vector<uint8_t> pdata;
        bool offered = false;  // the client offered to move off tcp
        Clock::time_point deadline;
    };

    explicit Listener(Engine *e) noexcept : engine_(e), backoff_(e, "connections") {}
    void accept_all();
    void read_hello(Pending &p);
    void complete(uint64_t token, Half &half);
    void drop(int fd);

    Engine *engine_;
    Fd lfd_;
    uint64_t lkey_ = 0;
    FdQueue<IncomingConn> requests_;
    std::shared_ptr<UpgradeDesk> desk_;  // nullptr: this endpoint takes no offers
    // engine thread only
    std::unordered_map<int, Pending> pending_;
    std::unordered_map<uint64_t, Half> halves_;
    AcceptBackoff backoff_;
};

}  // namespace rpma::tcp
