#include "provider/verbs/shared_recv_queue.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "provider/verbs/region.h"

namespace rpma::verbs {

std::atomic<pid_t> g_self_pid{::getpid()};
namespace {
[[maybe_unused]] const int g_atfork = ::pthread_atfork(
    nullptr, nullptr, [] { g_self_pid.store(::getpid(), std::memory_order_relaxed); });
}  // namespace

int SharedRecvQueue::create(ibv_pd *pd, uint32_t size,
                            std::unique_ptr<prov::SharedRecvQueue> *out) {
    ibv_srq_init_attr attr{};
    attr.attr.max_wr = size;
    attr.attr.max_sge = 1;
    ibv_srq *srq = ibv_create_srq(pd, &attr);
    if (!srq) {
        RPMA_LOG_ERROR("ibv_create_srq(%u entries): %s", size, std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    out->reset(new SharedRecvQueue(srq));
    return 0;
}

SharedRecvQueue::SharedRecvQueue(ibv_srq *srq) noexcept : srq_(srq), pid_(::getpid()) {}

SharedRecvQueue::~SharedRecvQueue() {
    if (::getpid() != pid_) return;
    if (int err = ibv_destroy_srq(srq_)) RPMA_LOG_ERROR("ibv_destroy_srq: %s", std::strerror(err));
}

int SharedRecvQueue::post(prov::RecvWr r) {
    if (self_pid() != pid_) {
        RPMA_LOG_ERROR("the shared receive queue belongs to the parent process");
        return RPMA_E_PROVIDER;
    }
    ibv_sge sge;
    ibv_recv_wr wr;
    fill_recv(r, &sge, &wr);
    ibv_recv_wr *bad = nullptr;
    if (int err = ibv_post_srq_recv(srq_, &wr, &bad)) {
        RPMA_LOG_ERROR("ibv_post_srq_recv: %s", std::strerror(err));
        return RPMA_E_PROVIDER;
    }
    return 0;
}

}  // namespace rpma::verbs
