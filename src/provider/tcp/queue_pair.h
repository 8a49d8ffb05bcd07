// The tcp provider's queue pair: the RC engine (rc/queue_pair.h) over two TCP streams, set up by
// its Connector (connector.h). The client connects both streams and sends a Hello on each
// (wire.h); the listener pairs them by token and hands them to the server's queue pair, which
// answers with a Reply on the main stream. Then both streams belong to the RC engine. Where the
// Reply says so, both streams move off tcp first (upgrade.h: shared memory between processes of
// one host), and from then on the RC engine runs over the upgrade's streams.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "provider/rc/queue_pair.h"
#include "provider/tcp/connector.h"
#include "provider/tcp/socket_stream.h"
#include "provider/tcp/upgrade.h"

namespace rpma::tcp {

using rc::QpConfig;

class QueuePair final : public rc::QueuePair {
  public:
    // upgrade: the way off tcp this connection may take (nullptr: none).
    static std::shared_ptr<QueuePair> create(Engine *engine, MrTable *mrs, const QpConfig &cfg,
                                             FdQueue<rpma_conn_event> *events,
                                             StreamUpgrade *upgrade = nullptr);

    // Client side: where connect() goes.
    void set_remote(const sockaddr_storage &addr, socklen_t len) noexcept {
        connector_.set_remote(addr, len);
    }
    // Client side: start connecting; the outcome arrives as an event.
    int connect(const void *pdata, uint8_t pdata_len) override;
    // Server side: take the request's two streams and accept with our private data.
    int accept(std::unique_ptr<prov::IncomingRequest> req, const void *pdata,
               uint8_t pdata_len) override;

  private:
    QueuePair(Engine *engine, MrTable *mrs, const QpConfig &cfg, FdQueue<rpma_conn_event> *events,
              StreamUpgrade *upgrade);

    void setup_events(Stream &s, uint32_t events) override;
    void handshake_out(Stream &s);
    void handshake_in();
    // Both streams leave tcp for the connector's link; its control socket joins the engine.
    bool move_to_upgrade();
    void fail_connect(rpma_conn_event ev) override;    // and ends the offer off tcp
    void on_events(int fd, uint32_t events) override;  // the control socket
    void stream_removed() override;
    std::shared_ptr<QueuePair> self() {
        return std::static_pointer_cast<QueuePair>(shared_from_this());
    }

    SocketStream main_sock_{&main_.fd};
    SocketStream join_sock_{&join_.fd};
    Connector connector_;
    std::atomic<uint64_t> ctl_key_{0};  // the upgrade's control socket's registration
};

}  // namespace rpma::tcp
