#include "provider/verbs/completion_channel.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/fd.h"
#include "common/log.h"

namespace rpma::verbs {

int CompletionChannel::create(ibv_context *ctx, std::unique_ptr<prov::CompletionChannel> *out) {
    ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
    if (!ch) {
        RPMA_LOG_ERROR("ibv_create_comp_channel: %s", std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    out->reset(new CompletionChannel(ch));
    return 0;
}

CompletionChannel::CompletionChannel(ibv_comp_channel *ch) noexcept : ch_(ch), pid_(::getpid()) {}

CompletionChannel::~CompletionChannel() {
    if (::getpid() != pid_) return;
    if (int err = ibv_destroy_comp_channel(ch_))
        RPMA_LOG_ERROR("ibv_destroy_comp_channel: %s", std::strerror(err));
}

prov::CompletionQueue *CompletionChannel::wait() {
    ibv_cq *cq = nullptr;
    void *context = nullptr;
    if (take(&cq, &context) != 0) return nullptr;
    return static_cast<prov::CompletionQueue *>(context);
}

int CompletionChannel::take(ibv_cq **cq, void **context, bool rearm) {
    return take_when_readable(ch_->fd, take_mu_, RPMA_E_NO_COMPLETION, [&] {
        if (ibv_get_cq_event(ch_, cq, context) != 0) {
            if (errno == EAGAIN) return RPMA_E_NO_COMPLETION;
            RPMA_LOG_ERROR("ibv_get_cq_event: %s", std::strerror(errno));
            return RPMA_E_PROVIDER;
        }
        ibv_ack_cq_events(*cq, 1);
        if (!rearm) return 0;
        if (int err = ibv_req_notify_cq(*cq, 0)) {
            RPMA_LOG_ERROR("ibv_req_notify_cq: %s", std::strerror(err));
            return RPMA_E_PROVIDER;
        }
        return 0;
    });
}

}  // namespace rpma::verbs
