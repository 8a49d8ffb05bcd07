// A verbs shared receive queue (rpma_srq): receives posted here serve every queue pair made with
// it, and their completions go to the RCQ each connection names.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <atomic>

#include "provider/provider.h"
#include "provider/verbs/region.h"

namespace rpma::verbs {

class SharedRecvQueue final : public prov::SharedRecvQueue {
  public:
    static int create(ibv_pd *pd, uint32_t size, std::unique_ptr<prov::SharedRecvQueue> *out);
    ~SharedRecvQueue() override;
    int post(prov::RecvWr r) override;
    ibv_srq *raw() const noexcept { return srq_; }

  private:
    explicit SharedRecvQueue(ibv_srq *srq) noexcept;
    ibv_srq *srq_;
    pid_t pid_;
};

// The scatter entry of a receive, and the work request naming it (num_sge 0 without a buffer).
// Inline: every receive posts through it.
inline void fill_recv(const prov::RecvWr &r, ibv_sge *sge, ibv_recv_wr *wr) noexcept {
    *wr = ibv_recv_wr{};
    wr->wr_id = r.wr_id;
    const prov::MemoryRegion *mr = r.mr();
    if (!mr) return;
    *sge = ibv_sge{reinterpret_cast<uintptr_t>(r.ptr), r.len, lkey_of(mr)};
    wr->sg_list = sge;
    wr->num_sge = 1;
}

// This process's id, as getpid() says, without its system call: every post asks (a forked child
// must not post on the parent's queues), so it is cached and refreshed in a child by a fork
// handler, as the soft engine does (src/provider/soft/engine.cc). Inline: the post path asks.
extern std::atomic<pid_t> g_self_pid;
inline pid_t self_pid() noexcept {
    return g_self_pid.load(std::memory_order_relaxed);
}

}  // namespace rpma::verbs
