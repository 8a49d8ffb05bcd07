#include "core/conn_req.h"

#include <netdb.h>

#include <cstring>

#include "common/log.h"
#include "core/conn_cfg.h"
#include "core/mr_local.h"
#include "core/srq.h"

namespace rpma {

int ConnReq::outgoing(Peer *peer, const char *addr, const char *port, const ConnCfg &cfg,
                      ConnReq **out) {
    std::unique_ptr<ConnReq> req(new ConnReq());
    int ret = ConnResources::create(peer, cfg, addr, port, nullptr, &req->r_);
    if (ret) return ret;
    *out = req.release();
    RPMA_LOG_NOTICE("connection request to %s port %s", addr, port);
    return 0;
}

int ConnReq::incoming(Peer *peer, std::unique_ptr<prov::IncomingRequest> in, const ConnCfg &cfg,
                      ConnReq **out) {
    std::unique_ptr<ConnReq> req(new ConnReq());
    req->incoming_ = true;
    req->in_ = std::move(in);
    int ret = ConnResources::create(peer, cfg, nullptr, nullptr, req->in_.get(), &req->r_);
    if (ret) return ret;  // the request is dropped, which rejects it (the client: REJECTED)
    *out = req.release();
    return 0;
}

ConnReq::~ConnReq() = default;

int ConnReq::connect(const rpma_conn_private_data *pdata, Conn **out) {
    const void *pd = pdata ? pdata->ptr : nullptr;
    uint8_t len = pdata ? pdata->len : 0;
    const prov::Caps &caps = r_->peer->caps();
    size_t max = incoming_ ? caps.accept_pdata_max : caps.connect_pdata_max;
    if (len > max) {
        // PROVIDER, as rdma_connect and rdma_accept refuse it (upstream checks nothing itself)
        RPMA_LOG_ERROR("private data of %u bytes; at most %zu fit", len, max);
        return RPMA_E_PROVIDER;
    }
    int ret;
    if (incoming_) {
        ret = r_->qp->accept(std::move(in_), pd, len);
    } else {
        ret = r_->qp->connect(pd, len);
    }
    if (ret) return ret;
    auto *c = new (std::nothrow) Conn(std::move(r_), incoming_);
    if (!c) return RPMA_E_NOMEM;
    *out = c;
    return 0;
}

int ConnReq::recv(MrLocal *dst, size_t offset, size_t len, uint64_t wr_id) {
    prov::RecvWr r;
    int ret = make_recv(r_->peer, dst, offset, len, wr_id, &r);
    return ret ? ret : r_->qp->post_recv(std::move(r));
}

void ConnReq::private_data(rpma_conn_private_data *pd) const {
    if (!in_ || in_->private_data().empty()) {
        pd->ptr = nullptr;
        pd->len = 0;
        return;
    }
    pd->ptr = const_cast<uint8_t *>(in_->private_data().data());
    pd->len = static_cast<uint8_t>(in_->private_data().size());
}

}  // namespace rpma
