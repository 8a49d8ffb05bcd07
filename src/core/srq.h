// A shared receive queue (rpma_srq): receives posted once, consumed by any connection using it.
#pragma once

#include <atomic>
#include <memory>

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

// Builds the receive described by (dst, offset, len) after checking it fits the region.
int make_recv(Peer *peer, MrLocal *dst, size_t offset, size_t len, uint64_t wr_id,
              prov::RecvWr *out);

}  // namespace rpma
