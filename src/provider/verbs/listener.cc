#include "provider/verbs/listener.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/fd.h"
#include "common/log.h"
#include "provider/verbs/cm_event.h"
#include "provider/verbs/connect_request.h"

namespace rpma::verbs {

namespace {

// As many pending requests as the kernel allows (rdma_listen caps it).
constexpr int kBacklog = 1024;

}  // namespace

int Listener::create(const char *addr, const char *port, std::shared_ptr<prov::Listener> *out) {
    rdma_addrinfo hints{};
    hints.ai_flags = RAI_PASSIVE;
    hints.ai_port_space = RDMA_PS_TCP;
    rdma_addrinfo *ai = nullptr;
    if (rdma_getaddrinfo(addr, port, &hints, &ai) != 0) {
        RPMA_LOG_ERROR("cannot resolve %s:%s for listening: %s", addr, port, std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    rdma_event_channel *ch = rdma_create_event_channel();
    rdma_cm_id *id = nullptr;
    int err = 0;
    const char *what = "";
    if (!ch) {
        err = errno, what = "rdma_create_event_channel";
    } else if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) {
        err = errno, what = "rdma_create_id";
        id = nullptr;
    } else if (rdma_bind_addr(id, ai->ai_src_addr) != 0) {
        err = errno, what = "rdma_bind_addr";
    } else if (rdma_listen(id, kBacklog) != 0) {
        err = errno, what = "rdma_listen";
    }
    rdma_freeaddrinfo(ai);
    if (err) {
        RPMA_LOG_ERROR("cannot listen on %s:%s: %s: %s", addr, port, what, std::strerror(err));
        if (id) rdma_destroy_id(id);
        if (ch) rdma_destroy_event_channel(ch);
        return RPMA_E_PROVIDER;
    }
    out->reset(new Listener(ch, id));
    return 0;
}

Listener::Listener(rdma_event_channel *ch, rdma_cm_id *id) noexcept
    : ch_(ch), id_(id), pid_(::getpid()) {}

Listener::~Listener() {
    close();
}

std::unique_ptr<prov::IncomingRequest> Listener::next() {
    if (::getpid() != pid_) {
        RPMA_LOG_ERROR("the endpoint belongs to the parent process");
        return nullptr;
    }
    for (;;) {
        bool skipped = false;
        auto req = take_when_readable(ch_->fd, mu_, std::unique_ptr<prov::IncomingRequest>(), [&] {
            std::unique_ptr<prov::IncomingRequest> r;
            rdma_cm_event *ev = nullptr;
            if (get_cm_event_now(ch_, &ev) != 0) {
                if (errno != EAGAIN) RPMA_LOG_ERROR("rdma_get_cm_event: %s", std::strerror(errno));
                return r;
            }
            // Acknowledged on every way out, before the queue pair migrates the id (which waits
            // for that): rdma_destroy_id waits for every event handed out.
            struct Ack {
                rdma_cm_event *ev;
                ~Ack() { rdma_ack_cm_event(ev); }
            } ack{ev};
            if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
                RPMA_LOG_WARNING("endpoint: unexpected %s event, skipped",
                                 rdma_event_str(ev->event));
                skipped = true;
                return r;
            }
            r = std::make_unique<ConnectRequest>(ev->id, ev->param.conn.private_data,
                                                 ev->param.conn.private_data_len);
            return r;
        });
        // the caller was woken by a skipped event: it must not block for the next one
        if (!skipped || !readable_now(ch_->fd)) return req;
    }
}

void Listener::close() {
    std::lock_guard lk(mu_);
    if (closed_) return;
    closed_ = true;
    if (::getpid() != pid_) return;
    // Requests not taken yet: each new id is rejected and freed with its event.
    set_nonblocking(ch_->fd, true);
    rdma_cm_event *ev = nullptr;
    while (rdma_get_cm_event(ch_, &ev) == 0) {
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            if (rdma_reject(ev->id, nullptr, 0) != 0)
                RPMA_LOG_WARNING("rdma_reject: %s", std::strerror(errno));
            rdma_cm_id *req = ev->id;
            rdma_ack_cm_event(ev);
            if (rdma_destroy_id(req) != 0)
                RPMA_LOG_ERROR("rdma_destroy_id: %s", std::strerror(errno));
            continue;
        }
        rdma_ack_cm_event(ev);
    }
    if (rdma_destroy_id(id_) != 0) RPMA_LOG_ERROR("rdma_destroy_id: %s", std::strerror(errno));
    rdma_destroy_event_channel(ch_);
}

}  // namespace rpma::verbs
