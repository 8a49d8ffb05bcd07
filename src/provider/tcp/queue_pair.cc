// The tcp queue pair's side of connection set-up: the client's connect and handshake, the
// server's accept, and the move off tcp; the protocol itself is the Connector's (connector.h).
#include "provider/tcp/queue_pair.h"

#include <sys/socket.h>

#include <cerrno>

#include "common/log.h"
#include "provider/tcp/listener.h"

namespace rpma::tcp {

std::shared_ptr<QueuePair> QueuePair::create(Engine *engine, MrTable *mrs, const QpConfig &cfg,
                                             FdQueue<rpma_conn_event> *events,
                                             StreamUpgrade *upgrade) {
    return std::shared_ptr<QueuePair>(new QueuePair(engine, mrs, cfg, events, upgrade));
}

QueuePair::QueuePair(Engine *engine, MrTable *mrs, const QpConfig &cfg,
                     FdQueue<rpma_conn_event> *events, StreamUpgrade *upgrade)
    : rc::QueuePair(engine, mrs, cfg, events), connector_(upgrade) {
    main_.io = &main_sock_;
    join_.io = &join_sock_;
}

void QueuePair::setup_events(Stream &s, uint32_t events) {
    if (conn_.state() == Cm::kConnecting || !s.connected) {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) handshake_out(s);
        return;
    }
    if (&s == &main_)
        handshake_in();
    else if (events & (EPOLLHUP | EPOLLERR)) {
        s.leave_engine();  // reset: the main stream reports the outcome
        stream_removed();
    }
}

int QueuePair::connect(const void *pdata, uint8_t pdata_len) {
    main_.answers_in = true;
    const Clock::time_point deadline = connector_.start(pdata, pdata_len, cfg_.timeout_ms);
    conn_.begin_connect(deadline);
    for (Stream *s : {&main_, &join_}) {
        Connector::Step st = connector_.open(&s->fd);
        if (st.kind == Connector::Step::kError) return RPMA_E_PROVIDER;
        if (st.kind == Connector::Step::kFail) {
            fail_connect(st.event);
            return 0;
        }
    }
    for (Stream *s : {&main_, &join_}) {
        {
            std::lock_guard lk(s->mu);
            s->want_out = true;  // connect completion shows as writability
        }
        if (!establish_stream(*s, EPOLLOUT)) return RPMA_E_PROVIDER;
    }
    engine_->add_timer(deadline, weak_from_this());
    return 0;
}

void QueuePair::handshake_out(Stream &s) {
    {
        std::lock_guard lk(s.mu);
        if (s.connected) return;  // Hello sent already; a late writability event
    }
    Connector::Step st = connector_.send_hello(s.fd.get(), *s.io, &s == &main_, qp_num_);
    if (st.kind == Connector::Step::kWait) return;
    if (st.kind != Connector::Step::kDone) {
        fail_connect(st.event);
        return;
    }
    {
        std::lock_guard lk(s.mu);
        s.connected = true;
        s.want_out = false;
        // The join stream waits for the answer on the main one: the server may send on it (even
        // its Disconnect and end of stream) as soon as it has accepted.
        s.rx_on = &s == &main_;
        s.update_mask();
    }
    if (!main_.connected || !join_.connected) return;  // both are set here, on the engine thread
    const Clock::time_point deadline = Connector::reply_deadline();
    if (conn_.await_reply(deadline)) engine_->add_timer(deadline, weak_from_this());
}

void QueuePair::handshake_in() {
    uint32_t remote_qp = 0;
    std::vector<uint8_t> pdata;
    Connector::Step st = connector_.read_reply(*main_.io, &remote_qp, &pdata);
    if (st.kind == Connector::Step::kWait) return;
    if (st.kind != Connector::Step::kDone) {
        fail_connect(st.event);
        return;
    }
    conn_.set_peer(remote_qp, std::move(pdata));  // shown only after ESTABLISHED
    if (connector_.link() && !move_to_upgrade()) {
        fail_connect(RPMA_CONN_LOST);
        return;
    }
    if (!conn_.take_reply()) return;
    conn_.post(RPMA_CONN_ESTABLISHED);
    // The registrations are edge-triggered: what came behind the Reply, on either stream, is
    // reported again by the mask's change.
    for (Stream *s : {&main_, &join_}) {
        std::lock_guard lk(s->mu);
        s->rx_on = true;
        s->update_mask();
    }
}

int QueuePair::accept(std::unique_ptr<prov::IncomingRequest> req, const void *pdata,
                      uint8_t pdata_len) {
    // the domain's listener made every request it is handed back
    IncomingConn &in = static_cast<Incoming *>(req.get())->conn;
    if (in.client_gone()) {
        RPMA_LOG_ERROR("accepting a connection request whose client has gone");
        return RPMA_E_PROVIDER;  // as rdma_accept fails once the client's CM has given up
    }
    join_.answers_in = true;
    conn_.set_peer(in.qp_num, std::move(in.pdata));
    Fd tcp_main = std::move(in.main);  // for the Reply; the streams run on the link when set
    connector_.adopt(std::move(in.upgrade));
    bool moves = connector_.link() != nullptr;
    if (!moves) {
        main_.fd = std::move(tcp_main);
        join_.fd = std::move(in.join);
    }
    // ESTABLISHED is queued and the streams are served before the client hears the answer, so
    // whatever the client does next (even a disconnect) lands after it.
    conn_.accept();
    conn_.post(RPMA_CONN_ESTABLISHED);
    for (Stream *s : {&main_, &join_}) {
        {
            std::lock_guard lk(s->mu);
            s->connected = true;
            s->rx_on = true;
        }
        if (moves) continue;
        Connector::set_socket_options(s->fd.get());
        if (!establish_stream(*s, EPOLLIN | EPOLLRDHUP)) return RPMA_E_PROVIDER;
    }
    // the moved streams are served before the client learns of them
    if (moves && !move_to_upgrade()) return RPMA_E_PROVIDER;
    if (!connector_.send_accept(moves ? &tcp_main : &main_.fd, qp_num_, pdata, pdata_len))
        lost("sending the accept failed", errno == EPIPE || errno == ECONNRESET);  // gone: CLOSED
    return 0;
}

bool QueuePair::move_to_upgrade() {
    UpgradeLink *link = connector_.link();
    for (Stream *s : {&main_, &join_}) {
        bool main = s == &main_;
        s->leave_engine();  // the tcp socket's registration, on the client
        stream_removed();
        {
            std::lock_guard lk(s->mu);  // a posting thread may look at them (update_mask)
            s->fd = link->take_wake(main);
            s->owned_io = link->stream(main, s->fd.get());
            s->io = s->owned_io.get();
        }
        if (!establish_stream(*s, EPOLLIN)) return false;
    }
    uint64_t key = engine_->add(link->ctl_fd(), EPOLLIN | EPOLLRDHUP, shared_from_this());
    ctl_key_.store(key);
    return key != 0;
}

void QueuePair::fail_connect(rpma_conn_event ev) {
    rc::QueuePair::fail_connect(ev);
    connector_.end_offer();
}

void QueuePair::on_events(int fd, uint32_t) {
    UpgradeLink *link = connector_.link();
    if (!link || fd != link->ctl_fd()) return;
    char b[64];
    ssize_t r = ::recv(fd, b, sizeof(b), MSG_DONTWAIT);
    if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR))) return;  // nothing is sent here
    // The peer's process closed its end, or died: each stream ends once what the peer wrote
    // into its ring is read, so an orderly close that got that far still ends as CLOSED.
    // (an event before move_to_upgrade stored the key comes again: the fd stays readable)
    if (uint64_t key = ctl_key_.exchange(0)) engine_->remove(key);
    link->peer_gone();
    // streams the engine does not watch (stalled, or read by a waiter) learn it here
    for (Stream *s : {&main_, &join_}) progress_.on_events(s->fd.get(), EPOLLIN | EPOLLRDHUP);
}

void QueuePair::stream_removed() {
    for (Stream *s : {&main_, &join_}) {
        std::lock_guard lk(s->mu);
        if (s->key) return;
    }
    // the registration holds this queue pair alive: it goes with the streams
    if (uint64_t key = ctl_key_.exchange(0)) engine_->remove(key);
}

}  // namespace rpma::tcp
