// A connection request (rpma_conn_req): outgoing (client) or incoming (from an endpoint).
#pragma once

#include <librpma.h>
#include <sys/socket.h>

#include <memory>
#include <vector>

#include "core/conn.h"
#include "provider/provider.h"

namespace rpma {

class ConnCfg;

class ConnReq {
  public:
    static int outgoing(Peer *peer, const char *addr, const char *port, const ConnCfg &cfg,
                        ConnReq **out);
    static int incoming(Peer *peer, std::unique_ptr<prov::IncomingRequest> in, const ConnCfg &cfg,
                        ConnReq **out);
    ~ConnReq();  // an incoming request not accepted is rejected

    // Connects (outgoing) or accepts (incoming). The request is spent either way.
    int connect(const rpma_conn_private_data *pdata, Conn **out);
    int recv(MrLocal *dst, size_t offset, size_t len, uint64_t wr_id);
    void private_data(rpma_conn_private_data *pd) const;
    Peer *peer() const noexcept { return r_->peer; }

  private:
    ConnReq() = default;
    std::unique_ptr<ConnResources> r_;
    bool incoming_ = false;
    std::unique_ptr<prov::IncomingRequest> in_;  // rejected if never accepted
};

}  // namespace rpma
