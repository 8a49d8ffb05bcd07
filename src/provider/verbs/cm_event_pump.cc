#include "provider/verbs/cm_event_pump.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace rpma::verbs {

int CmEventPump::create(std::unique_ptr<CmEventPump> *out) {
    rdma_event_channel *ch = rdma_create_event_channel();
    if (!ch) {
        RPMA_LOG_ERROR("rdma_create_event_channel: %s", std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    // The thread reads only after poll says so, and never blocks in rdma_get_cm_event.
    int fl = ::fcntl(ch->fd, F_GETFL);
    Fd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (fl < 0 || ::fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) != 0 || !wake.valid()) {
        RPMA_LOG_ERROR("connection event channel set-up: %s", std::strerror(errno));
        rdma_destroy_event_channel(ch);
        return RPMA_E_PROVIDER;
    }
    std::unique_ptr<CmEventPump> p(new CmEventPump(ch, std::move(wake)));
    try {
        p->thread_ = std::thread([q = p.get()] { q->run(); });
    } catch (const std::system_error &e) {
        RPMA_LOG_ERROR("cannot start the connection event thread: %s", e.what());
        return RPMA_E_PROVIDER;
    }
    *out = std::move(p);
    return 0;
}

CmEventPump::CmEventPump(rdma_event_channel *ch, Fd wake) noexcept
    : ch_(ch), wake_(std::move(wake)) {}

CmEventPump::~CmEventPump() {
    if (thread_.joinable()) {
        uint64_t one = 1;
        while (::write(wake_.get(), &one, sizeof(one)) < 0 && errno == EINTR) {
        }
        thread_.join();
    }
    rdma_destroy_event_channel(ch_);
}

int CmEventPump::adopt(rdma_cm_id *id, CmEventSink *sink) {
    {
        std::lock_guard lk(mu_);
        sinks_[id] = sink;
    }
    if (rdma_migrate_id(id, ch_) != 0) {
        RPMA_LOG_ERROR("rdma_migrate_id: %s", std::strerror(errno));
        forget(id);
        return RPMA_E_PROVIDER;
    }
    return 0;
}

void CmEventPump::forget(rdma_cm_id *id) noexcept {
    std::lock_guard lk(mu_);
    sinks_.erase(id);
}

void CmEventPump::run() noexcept {
    pollfd fds[2] = {{ch_->fd, POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    int failed = 0;  // the errno of the last failed read, logged once per run of failures
    for (;;) {
        // After a failed read the channel still polls readable: wait out kRetryMs on the wake
        // fd alone rather than spin, then try again (the failure may pass).
        if (::poll(failed ? &fds[1] : fds, failed ? 1 : 2, failed ? kRetryMs : -1) < 0) {
            if (errno == EINTR) continue;
            RPMA_LOG_FATAL("connection event thread: poll: %s", std::strerror(errno));
            return;
        }
        if (fds[1].revents) return;
        rdma_cm_event *ev = nullptr;
        while (rdma_get_cm_event(ch_, &ev) == 0) {
            if (failed) RPMA_LOG_NOTICE("connection events are read again");
            failed = 0;
            {
                std::lock_guard lk(mu_);
                auto it = sinks_.find(ev->id);
                if (it != sinks_.end()) it->second->on_cm_event(*ev);
            }
            // Acknowledged after the lock: rdma_destroy_id waits for it, under no lock of ours.
            if (rdma_ack_cm_event(ev) != 0)
                RPMA_LOG_ERROR("rdma_ack_cm_event: %s", std::strerror(errno));
        }
        if (errno != EAGAIN && errno != failed) {
            RPMA_LOG_ERROR("rdma_get_cm_event: %s; connection events wait until it reads again",
                           std::strerror(errno));
            failed = errno;
        } else if (errno == EAGAIN) {
            failed = 0;
        }
    }
}

}  // namespace rpma::verbs
