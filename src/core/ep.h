// A listening endpoint (rpma_ep).
#pragma once

#include <memory>

#include "core/peer.h"
#include "provider/provider.h"

namespace rpma {

class ConnCfg;
class ConnReq;

class Ep {
  public:
    static int listen(Peer *peer, const char *addr, const char *port, Ep **out);
    ~Ep();
    Peer *peer() const noexcept { return peer_; }
    int fd() noexcept { return l_->fd(); }
    int next_conn_req(const ConnCfg &cfg, ConnReq **out);

  private:
    Ep(Peer *p, std::shared_ptr<prov::Listener> l) noexcept : peer_(p), l_(std::move(l)) {}
    Peer *peer_;
    std::shared_ptr<prov::Listener> l_;
};

}  // namespace rpma
