#include "core/conn_req.h"

#include <netdb.h>

#include <cstring>

#include "core/conn_cfg.h"
#include "core/log.h"
#include "core/mr_local.h"
#include "core/srq.h"

namespace rpma {

int ConnReq::outgoing(Peer *peer, const char *addr, const char *port, const ConnCfg &cfg,
                      ConnReq **out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    int rc = ::getaddrinfo(addr, port, &hints, &res);
    if (rc != 0) {
        RPMA_LOG_ERROR("cannot resolve %s:%s: %s", addr, port, gai_strerror(rc));
        return RPMA_E_PROVIDER;
    }
    std::unique_ptr<ConnReq> req(new ConnReq());
    std::memcpy(&req->addr_, res->ai_addr, res->ai_addrlen);
    req->addr_len_ = res->ai_addrlen;
    freeaddrinfo(res);
    int ret = ConnResources::create(peer, cfg, &req->r_);
    if (ret) return ret;
    *out = req.release();
    return 0;
}

int ConnReq::incoming(Peer *peer, tcp::IncomingConn in, const ConnCfg &cfg, ConnReq **out) {
    std::unique_ptr<ConnReq> req(new ConnReq());
    req->incoming_ = true;
    req->in_ = std::move(in);
    int ret = ConnResources::create(peer, cfg, &req->r_);
    if (ret) return ret;  // the request is dropped: the client sees it closed
    *out = req.release();
    return 0;
}

ConnReq::~ConnReq() {
    if (incoming_ && in_.main.valid()) tcp::QueuePair::reject(in_.main);
}

int ConnReq::connect(const rpma_conn_private_data *pdata, Conn **out) {
    const void *pd = pdata ? pdata->ptr : nullptr;
    uint8_t len = pdata ? pdata->len : 0;
    size_t max = incoming_ ? tcp::kAcceptPdataMax : tcp::kConnectPdataMax;
    if (len > max) {
        RPMA_LOG_ERROR("private data of %u bytes; at most %zu fit", len, max);
        return RPMA_E_INVAL;
    }
    int ret;
    if (incoming_) {
        ret = r_->qp->accept(std::move(in_.main), std::move(in_.join), in_.qp_num, in_.pdata, pd,
                             len);
    } else {
        ret = r_->qp->connect(addr_, addr_len_, pd, len);
    }
    if (ret) return ret;
    auto *c = new (std::nothrow) Conn(std::move(r_));
    if (!c) return RPMA_E_NOMEM;
    *out = c;
    return 0;
}

int ConnReq::recv(MrLocal *dst, size_t offset, size_t len, uint64_t wr_id) {
    PostedRecv r;
    int ret = make_recv(r_->peer, dst, offset, len, wr_id, &r);
    return ret ? ret : r_->qp->post_recv(std::move(r));
}

void ConnReq::private_data(rpma_conn_private_data *pd) const {
    if (!incoming_ || in_.pdata.empty()) {
        pd->ptr = nullptr;
        pd->len = 0;
        return;
    }
    pd->ptr = const_cast<uint8_t *>(in_.pdata.data());
    pd->len = static_cast<uint8_t>(in_.pdata.size());
}

}  // namespace rpma
