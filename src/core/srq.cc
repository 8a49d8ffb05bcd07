#include "core/srq.h"

#include "common/log.h"
#include "core/mr_local.h"
#include "core/srq_cfg.h"

namespace rpma {

int recv_refused(const MrLocal *dst, size_t offset, size_t len) {
    RPMA_LOG_ERROR("receive buffer [%zu, +%zu) outside the region of %zu bytes", offset, len,
                   dst->size());
    return RPMA_E_INVAL;
}

int Srq::create(Peer *peer, const SrqCfg &cfg, Srq **out) {
    std::unique_ptr<Srq> s(new Srq(peer));
    peer->ref();  // at once: ~Srq lets go of it, also when a step below fails
    if (int ret = peer->domain().create_srq(cfg.rq_size(), &s->rq_)) return ret;
    if (cfg.rcq_size() > 0) {
        if (int ret = peer->domain().create_channel(&s->channel_)) return ret;
        if (int ret = peer->domain().create_cq(s->channel_.get(), false, cfg.rcq_size(), &s->rcq_))
            return ret;
    }
    *out = s.release();
    return 0;
}

Srq::~Srq() {
    peer_->unref();
}

int Srq::recv(MrLocal *dst, size_t offset, size_t len, uint64_t wr_id) {
    // Refused in a forked child, as rpma_recv is: the post serves a waiting connection on this
    // thread, and the connection is the parent's.
    if (int ret = peer_->domain().check_process("the shared receive queue")) return ret;
    prov::RecvWr r;
    int ret = make_recv(peer_, dst, offset, len, wr_id, &r);
    return ret ? ret : rq_->post(std::move(r));
}

}  // namespace rpma
