// A connection (rpma_conn) and the resources it is built from. The resources exist from the
// connection request on, so receives can be posted before the connection is established.
#pragma once

#include <librpma.h>

#include <atomic>
#include <memory>

#include "common/fd_queue.h"
#include "core/mr_local.h"
#include "core/peer.h"
#include "provider/provider.h"

namespace rpma {

class ConnCfg;
class MrLocal;
class MrRemote;
class Srq;

struct ConnResources {
    // The queue pair connects to addr:port, or (addr null) is for the incoming request `in`.
    static int create(Peer *peer, const ConnCfg &cfg, const char *addr, const char *port,
                      prov::IncomingRequest *in, std::unique_ptr<ConnResources> *out);
    ~ConnResources();

    Peer *peer = nullptr;
    Srq *srq = nullptr;
    bool shared = false;
    std::unique_ptr<prov::CompletionChannel> channel;      // the CQ's, or the shared one
    std::unique_ptr<prov::CompletionChannel> rcq_channel;  // the RCQ's own when not shared
    std::unique_ptr<prov::CompletionQueue> cq;
    std::unique_ptr<prov::CompletionQueue> rcq;
    std::unique_ptr<FdQueue<rpma_conn_event>> events;  // null: the queue pair reads its own
    std::shared_ptr<prov::QueuePair> qp;
};

class Conn {
  public:
    // server: the connection counts as established at once (the client's private data came
    // with the request, and rdma_accept leaves the queue pair ready to send); a client's from
    // the ESTABLISHED event on (next_event).
    Conn(std::unique_ptr<ConnResources> r, bool server) noexcept
        : r_(std::move(r)), established_(server) {}

    Peer *peer() const noexcept { return r_->peer; }
    int event_fd() const noexcept { return r_->events ? r_->events->fd() : r_->qp->event_fd(); }
    int next_event(rpma_conn_event *ev);
    void private_data(rpma_conn_private_data *pd) const;
    void apply_remote_peer_cfg(bool direct_write_to_pmem) noexcept {
        direct_write_to_pmem_ = direct_write_to_pmem;
    }
    uint32_t qp_num() const noexcept { return r_->qp->qp_num(); }
    prov::CompletionQueue *cq() const noexcept { return r_->cq.get(); }
    prov::CompletionQueue *rcq() const noexcept { return r_->rcq.get(); }
    bool shared_channel() const noexcept { return r_->shared; }
    int compl_fd() const noexcept { return r_->channel->fd(); }
    int wait(int flags, prov::CompletionQueue **cq, bool *is_rcq);
    int disconnect();

    int read(MrLocal *dst, size_t dst_off, const MrRemote *src, size_t src_off, size_t len,
             int flags, uint64_t wr_id);
    int write(const MrRemote *dst, size_t dst_off, const MrLocal *src, size_t src_off, size_t len,
              int flags, uint64_t wr_id, const uint32_t *imm);
    int atomic_write(const MrRemote *dst, size_t dst_off, const char src[8], int flags,
                     uint64_t wr_id);
    int flush(const MrRemote *dst, size_t dst_off, size_t len, rpma_flush_type type, int flags,
              uint64_t wr_id);
    int send(const MrLocal *src, size_t off, size_t len, int flags, uint64_t wr_id,
             const uint32_t *imm);
    int recv(MrLocal *dst, size_t off, size_t len, uint64_t wr_id);

  private:
    // The checks every post makes inline; each logs out of line, only when it fails.
    // An empty range has no lkey to check (MrLocal::holds).
    bool local_fault(const MrLocal *mr, size_t len, bool written, const char *what) const {
        return mr && len != 0 && (mr->peer() != r_->peer || (written && !mr->local_write())) &&
               fault_logged(mr, what);
    }
    bool op_len_ok(size_t len) const {
        return len <= r_->peer->caps().max_op_length || len_refused(len);
    }
    bool fault_logged(const MrLocal *mr, const char *what) const;
    bool len_refused(size_t len) const;
    // The post itself, once the connection is established: before, a NIC's queue pair is not
    // ready to send (librdmacm moves a client's to RTS as the client reads ESTABLISHED), and a
    // tcp connection whose Reply came first must not take what the NIC would refuse.
    int post(prov::SendWr &&wr) {
        if (!established_.load(std::memory_order_acquire)) [[unlikely]]
            return not_established();
        return r_->qp->post_send(std::move(wr));
    }
    int not_established() const;

    std::unique_ptr<ConnResources> r_;
    std::atomic<bool> direct_write_to_pmem_{false};
    // A server's connection, or a client's once the application took ESTABLISHED. As upstream,
    // a client shows the server's private data from then on (before, the engine may still be
    // writing it), and takes posts from then on.
    std::atomic<bool> established_;
};

}  // namespace rpma
