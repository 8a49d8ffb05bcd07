// A shared receive queue (rpma_srq): receives posted once, consumed by any connection using it.
#pragma once

#include <atomic>
#include <memory>

#include "core/mr_local.h"
#include "core/peer.h"
#include "provider/provider.h"

namespace rpma {

class MrLocal;
class SrqCfg;

class Srq {
  public:
    static int create(Peer *peer, const SrqCfg &cfg, Srq **out);
    ~Srq();
    int recv(MrLocal *dst, size_t offset, size_t len, uint64_t wr_id);
    prov::SharedRecvQueue &queue() noexcept { return *rq_; }
    prov::CompletionQueue *rcq() const noexcept { return rcq_.get(); }

    // Connections (and connection requests) built with this SRQ; while there are any it cannot
    // be deleted, as ibv_destroy_srq fails with EBUSY.
    void ref() noexcept { users_.fetch_add(1); }
    void unref() noexcept { users_.fetch_sub(1); }
    int users() const noexcept { return users_.load(); }

  private:
    explicit Srq(Peer *peer) noexcept : peer_(peer) {}
    Peer *peer_;
    std::unique_ptr<prov::SharedRecvQueue> rq_;
    std::unique_ptr<prov::CompletionChannel> channel_;
    std::unique_ptr<prov::CompletionQueue> rcq_;
    std::atomic<int> users_{0};
};

// Logs why a receive does not fit its region: RPMA_E_INVAL.
int recv_refused(const MrLocal *dst, size_t offset, size_t len);

// Builds the receive described by (dst, offset, len) into *out, a default RecvWr, after checking
// it fits the region (it fills only what differs from the default). Inline: every receive posts
// through it.
inline int make_recv(Peer *peer, MrLocal *dst, size_t offset, size_t len, uint64_t wr_id,
                     prov::RecvWr *out) {
    out->wr_id = wr_id;
    if (!dst) return 0;
    if (!dst->holds(offset, len) || len > peer->caps().max_op_length) [[unlikely]]
        return recv_refused(dst, offset, len);
    // Borrowed, not copied: a provider takes a count only if it keeps the receive.
    out->borrowed = &dst->region();
    out->ptr = dst->at(offset);
    out->len = static_cast<uint32_t>(len);
    // as a NIC checks the lkey, unless there is nothing to place (MrLocal::holds)
    out->usable = len == 0 || (dst->local_write() && dst->peer() == peer);
    return 0;
}

}  // namespace rpma
