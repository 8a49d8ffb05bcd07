// A shared receive queue (rpma_srq): receives posted once, consumed by any connection using it.
#pragma once

#include <atomic>
#include <memory>

#include "core/compl_channel.h"
#include "core/cq.h"
#include "core/peer.h"
#include "core/recv_queue.h"

namespace rpma {

class MrLocal;
class SrqCfg;

class Srq {
  public:
    static int create(Peer *peer, const SrqCfg &cfg, Srq **out);
    ~Srq();
    int recv(MrLocal *dst, size_t offset, size_t len, uint64_t wr_id);
    RecvQueue &queue() noexcept { return rq_; }
    Cq *rcq() const noexcept { return rcq_.get(); }
    Peer *peer() const noexcept { return peer_; }

    // Connections (and connection requests) built with this SRQ; while there are any it cannot
    // be deleted, as ibv_destroy_srq fails with EBUSY.
    void ref() noexcept { users_.fetch_add(1); }
    void unref() noexcept { users_.fetch_sub(1); }
    int users() const noexcept { return users_.load(); }

  private:
    Srq(Peer *peer, uint32_t rq_size) : peer_(peer), rq_(rq_size) {}
    Peer *peer_;
    RecvQueue rq_;
    std::unique_ptr<ComplChannel> channel_;
    std::unique_ptr<Cq> rcq_;
    std::atomic<int> users_{0};
};

// Builds the receive described by (dst, offset, len) after checking it fits the region.
int make_recv(const Peer *peer, MrLocal *dst, size_t offset, size_t len, uint64_t wr_id,
              PostedRecv *out);

}  // namespace rpma
