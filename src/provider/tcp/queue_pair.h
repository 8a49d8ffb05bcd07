// The tcp provider's queue pair: the RC engine (rc/queue_pair.h) over two TCP streams, and the
// connection set-up that opens them. The client connects both streams and sends a Hello on each
// (wire.h); the listener pairs them by token and hands them to the server's queue pair, which
// answers with a Reply on the main stream. Then both streams belong to the RC engine. Between
// processes on one host both streams move onto shared memory instead (shm/link.h): the Reply
// says so, and from then on the RC engine runs over the rings.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "provider/rc/queue_pair.h"
#include "provider/shm/link.h"
#include "provider/tcp/socket_stream.h"
#include "provider/tcp/wire.h"

namespace rpma::tcp {

using rc::QpConfig;

class QueuePair final : public rc::QueuePair {
  public:
    // Test hook for fuzzing (tests/fuzz/hooks.cc): builds an established queue pair over
    // in-memory streams, with no engine registration, feeds `data` as the peer's bytes on one
    // stream and processes them on the calling thread. kind 0: the peer's requests
    // (responder); 1: answers to our requests (completer, after a few posted requests); 2: the
    // server's reply to our connect. cq and events must outlive the engine.
    static void fuzz_feed(Engine *engine, MrTable *mrs, Cq *cq, FdQueue<rpma_conn_event> *events,
                          int kind, const uint8_t *data, size_t size);

    static std::shared_ptr<QueuePair> create(Engine *engine, MrTable *mrs, const QpConfig &cfg,
                                             FdQueue<rpma_conn_event> *events);

    // Client side: where connect() goes.
    void set_remote(const sockaddr_storage &addr, socklen_t len) noexcept {
        remote_addr_ = addr;
        remote_addr_len_ = len;
    }
    // Client side: start connecting; the outcome arrives as an event.
    int connect(const void *pdata, uint8_t pdata_len) override;
    // Server side: take the request's two streams and accept with our private data.
    int accept(std::unique_ptr<prov::IncomingRequest> req, const void *pdata,
               uint8_t pdata_len) override;
    static void reject(Fd &main);

  private:
    QueuePair(Engine *engine, MrTable *mrs, const QpConfig &cfg, FdQueue<rpma_conn_event> *events);

    static void post_requests(QueuePair &qp, const std::shared_ptr<Region> &region, char *local);
    void setup_events(Stream &s, uint32_t events) override;
    void handshake_out(Stream &s);
    void handshake_in();
    // Client, before its main Hello: offers shared memory where the provider choice allows.
    // False if the connection must fail (RPMA_PROVIDER=shm and no offer could be made).
    bool make_offer(Hello &h);
    // Both streams leave tcp for shm_'s rings; the control socket joins the engine.
    bool move_to_shm();
    void other_events(int fd, uint32_t events) override;
    void stream_removed() override;
    std::shared_ptr<QueuePair> self() {
        return std::static_pointer_cast<QueuePair>(shared_from_this());
    }

    SocketStream main_sock_{&main_.fd};
    SocketStream join_sock_{&join_.fd};
    sockaddr_storage remote_addr_{};
    socklen_t remote_addr_len_ = 0;
    uint64_t token_ = 0;
    std::vector<uint8_t> local_pdata_;
    Reply reply_{};
    size_t reply_got_ = 0;
    std::shared_ptr<shm::Link> shm_;    // the connection runs (or, client, may run) on it
    std::atomic<uint64_t> ctl_key_{0};  // the control socket's registration
};

}  // namespace rpma::tcp
