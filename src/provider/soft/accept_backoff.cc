#include "provider/soft/accept_backoff.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace rpma {

namespace {
constexpr Clock::duration kMinBackoff = std::chrono::milliseconds(10);
constexpr Clock::duration kMaxBackoff = std::chrono::seconds(1);

// Out of a resource that frees up on its own: back off, as retrying at once spins.
bool exhausted(int err) noexcept {
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}
}  // namespace

void AcceptBackoff::watch(int fd, uint64_t key, std::weak_ptr<Handler> owner) noexcept {
    fd_ = fd;
    key_ = key;
    owner_ = std::move(owner);
}

Fd AcceptBackoff::accept() {
    for (;;) {
        Fd s(::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (s.valid()) {
            if (failures_) {
                RPMA_LOG_NOTICE("accepting %s again after %llu failed attempts", what_,
                                static_cast<unsigned long long>(failures_));
                failures_ = unreported_ = 0;
            }
            backoff_ = Clock::duration::zero();
            return s;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (exhausted(errno))
            pause(strerror(errno));
        else if (errno != EAGAIN)
            RPMA_LOG_WARNING("accept (%s): %m", what_);
        return s;
    }
}

void AcceptBackoff::pause(const char *why) {
    if (paused_ || !key_) return;
    auto now = Clock::now();
    backoff_ =
        backoff_ == Clock::duration::zero() ? kMinBackoff : std::min(2 * backoff_, kMaxBackoff);
    ++failures_;
    // at most one line a second, however often accept fails
    if (last_report_ == Clock::time_point{} || now - last_report_ >= std::chrono::seconds(1)) {
        long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(backoff_).count();
        if (unreported_)
            RPMA_LOG_WARNING(
                "cannot accept %s: %s; retrying in %lld ms (%llu more failures since the last "
                "report)",
                what_, why, ms, static_cast<unsigned long long>(unreported_));
        else
            RPMA_LOG_WARNING("cannot accept %s: %s; retrying in %lld ms", what_, why, ms);
        last_report_ = now;
        unreported_ = 0;
    } else {
        ++unreported_;
    }
    paused_ = true;
    resume_at_ = now + backoff_;
    engine_->modify(fd_, key_, 0);  // level-triggered: a waiting connection would spin
    engine_->add_timer(resume_at_, owner_);
}

void AcceptBackoff::on_timer() noexcept {
    if (!paused_ || resume_at_ > Clock::now()) return;
    paused_ = false;
    if (key_) engine_->modify(fd_, key_, EPOLLIN);
}

}  // namespace rpma
