#include "provider/verbs/completion_queue.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace rpma::verbs {

int CompletionQueue::create(ibv_context *ctx, CompletionChannel *channel, bool shared,
                            uint32_t size, std::unique_ptr<prov::CompletionQueue> *out) {
    std::unique_ptr<CompletionQueue> q(new CompletionQueue(channel, shared));
    q->cq_ = ibv_create_cq(ctx, static_cast<int>(size), q.get(), channel->raw(), 0);
    if (!q->cq_) {
        RPMA_LOG_ERROR("ibv_create_cq(%u entries): %s", size, std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    if (int err = ibv_req_notify_cq(q->cq_, 0)) {
        RPMA_LOG_ERROR("ibv_req_notify_cq: %s", std::strerror(err));
        return RPMA_E_PROVIDER;
    }
    *out = std::move(q);
    return 0;
}

CompletionQueue::CompletionQueue(CompletionChannel *channel, bool shared) noexcept
    : channel_(channel), shared_(shared), pid_(::getpid()) {}

CompletionQueue::~CompletionQueue() {
    if (!cq_ || ::getpid() != pid_) return;
    if (int err = ibv_destroy_cq(cq_)) RPMA_LOG_ERROR("ibv_destroy_cq: %s", std::strerror(err));
}

int CompletionQueue::get_wc(int num_entries, ibv_wc *wc, int *got) {
    int n = 0;
    if (has_held_.load(std::memory_order_acquire)) {
        std::lock_guard lk(held_mu_);
        if (has_held_.load(std::memory_order_relaxed)) {
            wc[n++] = held_;
            has_held_.store(false, std::memory_order_release);
        }
    }
    if (n < num_entries) {
        int r = ibv_poll_cq(cq_, num_entries - n, wc + n);
        if (r < 0) {
            RPMA_LOG_ERROR("ibv_poll_cq: %s", std::strerror(-r));
            if (n == 0) return RPMA_E_PROVIDER;
        } else {
            n += r;
        }
    }
    if (n == 0) return RPMA_E_NO_COMPLETION;
    if (got) *got = n;
    return 0;
}

int CompletionQueue::wait() {
    if (shared_) return RPMA_E_SHARED_CHANNEL;
    ibv_cq *cq = nullptr;
    void *context = nullptr;
    return channel_->take(&cq, &context, true);
}

void CompletionQueue::arm() noexcept {
    if (int err = ibv_req_notify_cq(cq_, 0))
        RPMA_LOG_ERROR("ibv_req_notify_cq: %s", std::strerror(err));
}

bool CompletionQueue::empty() {
    std::lock_guard lk(held_mu_);
    if (has_held_.load(std::memory_order_relaxed)) return false;
    if (ibv_poll_cq(cq_, 1, &held_) != 1) return true;
    has_held_.store(true, std::memory_order_release);
    return false;
}

}  // namespace rpma::verbs
