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
    int fd() const noexcept { return fd_; }
    int next_conn_req(const ConnCfg &cfg, ConnReq **out);

  private:
    Ep(Peer *p, std::shared_ptr<prov::Listener> l) noexcept
        : peer_(p), l_(std::move(l)), fd_(l_->fd()) {}
    Peer *peer_;
    std::shared_ptr<prov::Listener> l_;
    // Taken once: rpma_ep_get_fd then makes no call into the provider, which matters to a
    // process out of descriptors (UBSan's check of a virtual call needs one for a pipe).
    int fd_;
};

}  // namespace rpma
