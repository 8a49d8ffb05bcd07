// The connection's CM state (connection.h): each transition under mu_, made once.
#include "provider/rc/connection.h"

namespace rpma::rc {

Connection::Cm Connection::state() {
    std::lock_guard lk(mu_);
    return cm_;
}

bool Connection::established() {
    std::lock_guard lk(mu_);
    return cm_ == Cm::kEstablished;
}

Connection::Posts Connection::posts() {
    std::lock_guard lk(mu_);
    if (cm_ == Cm::kIdle || cm_ == Cm::kConnecting || cm_ == Cm::kAwaitReply) return Posts::kNotYet;
    bool open = !(cm_ == Cm::kDone || cm_ == Cm::kClosing || disc_sent_);
    return open ? Posts::kOpen : Posts::kFlushed;
}

void Connection::begin_connect(Clock::time_point deadline) {
    // under mu_: once a stream is registered, the engine may move the deadline (await_reply)
    std::lock_guard lk(mu_);
    cm_ = Cm::kConnecting;
    deadline_ = deadline;
}

bool Connection::await_reply(Clock::time_point deadline) {
    std::lock_guard lk(mu_);
    if (cm_ != Cm::kConnecting) return false;
    cm_ = Cm::kAwaitReply;
    deadline_ = deadline;
    return true;
}

bool Connection::take_reply() {
    std::lock_guard lk(mu_);
    if (cm_ != Cm::kAwaitReply || disc_sent_) return false;  // failed, closed or ended meanwhile
    cm_ = Cm::kEstablished;
    return true;
}

void Connection::accept() {
    std::lock_guard lk(mu_);
    cm_ = Cm::kEstablished;
}

void Connection::set_peer(uint32_t qp, std::vector<uint8_t> pdata) {
    remote_qp_ = qp;
    remote_pdata_ = std::move(pdata);
}

bool Connection::begin_close(Clock::time_point deadline) {
    closed_.store(true);
    std::lock_guard lk(mu_);
    bool graceful = cm_ == Cm::kEstablished;
    cm_ = graceful ? Cm::kClosing : Cm::kDone;
    disc_sent_ = true;
    deadline_ = deadline;
    return graceful;
}

bool Connection::mark_failed() {
    std::lock_guard lk(mu_);
    if (cm_ == Cm::kDone) return false;
    cm_ = Cm::kDone;
    return true;
}

bool Connection::mark_lost() {
    std::lock_guard lk(mu_);
    if (cm_ == Cm::kDone || cm_ == Cm::kClosing) return false;
    cm_ = Cm::kDone;
    return true;
}

Connection::Disconnect Connection::request_disconnect() {
    std::lock_guard lk(mu_);
    if (disc_sent_) return Disconnect::kNothing;
    bool setup = cm_ == Cm::kConnecting || cm_ == Cm::kAwaitReply;
    if (cm_ != Cm::kEstablished && !setup) return Disconnect::kNothing;
    disc_sent_ = true;
    return setup ? Disconnect::kEndSetup : Disconnect::kSend;
}

bool Connection::set_answers_due(Clock::time_point due) {
    std::lock_guard lk(mu_);
    if (answers_due_ != Clock::time_point{}) return false;
    answers_due_ = due;
    return true;
}

Connection::Due Connection::due(Clock::time_point now) {
    std::lock_guard lk(mu_);
    if (cm_ == Cm::kClosing) return now < deadline_ ? Due::kNothing : Due::kLingerOver;
    if (closed_) return Due::kNothing;
    if (cm_ == Cm::kEstablished && answers_due_ != Clock::time_point{} && now >= answers_due_)
        return Due::kAnswersOverdue;
    if ((cm_ == Cm::kConnecting || cm_ == Cm::kAwaitReply) && now >= deadline_)
        return Due::kSetupTimedOut;
    return Due::kNothing;
}

}  // namespace rpma::rc
