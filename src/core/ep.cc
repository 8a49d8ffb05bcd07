#include "core/ep.h"

#include "common/cancel.h"
#include "common/log.h"
#include "core/conn_req.h"

namespace rpma {

int Ep::listen(Peer *peer, const char *addr, const char *port, Ep **out) {
    std::shared_ptr<prov::Listener> l;
    int ret = peer->domain().listen(addr, port, &l);
    if (ret) return ret;
    auto *ep = new (std::nothrow) Ep(peer, l);
    if (!ep) {
        l->close();
        return RPMA_E_NOMEM;
    }
    peer->ref();
    *out = ep;
    RPMA_LOG_NOTICE("listening on %s port %s", addr, port);
    return 0;
}

Ep::~Ep() {
    l_->close();
    peer_->unref();
}

int Ep::next_conn_req(const ConnCfg &cfg, ConnReq **out) {
    auto in = l_->next();  // the wait, cancellable as the caller has it (common/cancel.h)
    if (!in) return RPMA_E_NO_EVENT;
    CancelOff off;
    return ConnReq::incoming(peer_, std::move(in), cfg, out);
}

}  // namespace rpma
