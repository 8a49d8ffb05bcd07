// Connection set-up over TCP: the client's connect and handshake, the server's accept, and the
// socket options both ends share.
#include "provider/tcp/queue_pair.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>

#include "common/log.h"
#include "provider/tcp/listener.h"

namespace rpma::tcp {

namespace {

constexpr auto kReplyTimeout = std::chrono::seconds(30);

// How long a silent or unreachable peer may take to be declared LOST: RPMA_DEAD_PEER_TIMEOUT_MS
// (documented in docs/tcp-provider.md), default 15 s. Idle connections probe with keepalives;
// data the peer never acknowledges times out through TCP_USER_TIMEOUT.
int dead_peer_timeout_ms() {
    static const int ms = [] {
        const char *env = getenv("RPMA_DEAD_PEER_TIMEOUT_MS");
        long v = env ? strtol(env, nullptr, 10) : 0;
        return v >= 1000 && v <= 3600 * 1000 ? static_cast<int>(v) : 15000;
    }();
    return ms;
}

// Keepalive: the first probe after a third of the dead-peer timeout, then kKeepaliveProbes
// probes spaced so that the last one fails at about the timeout.
constexpr int kKeepaliveProbes = 3;

// From the kernel on every call: a generator seeded once would hand a forked child its parent's
// next tokens, and the listener takes two equal tokens for one connection.
uint64_t random_token() {
    uint64_t t = 0;
    if (::getrandom(&t, sizeof(t), 0) == static_cast<ssize_t>(sizeof(t))) return t;
    return (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
}

// TCP_NODELAY, keepalive and TCP_USER_TIMEOUT from the dead-peer timeout.
void set_socket_options(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int ms = dead_peer_timeout_ms();
    unsigned user_timeout = static_cast<unsigned>(ms);
    int idle = std::max(1, ms / 3 / 1000);
    int intvl = std::max(1, ms / (3 * kKeepaliveProbes) / 1000), cnt = kKeepaliveProbes;
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

// Only for the handshake: a fresh socket's buffer always takes a few hundred bytes.
bool write_all_small(rc::ByteStream &io, const void *p, size_t n) {
    iovec v{const_cast<void *>(p), n};
    return io.writev(&v, 1) == static_cast<ssize_t>(n);
}

}  // namespace

std::shared_ptr<QueuePair> QueuePair::create(Engine *engine, MrTable *mrs, const QpConfig &cfg,
                                             FdQueue<rpma_conn_event> *events) {
    return std::shared_ptr<QueuePair>(new QueuePair(engine, mrs, cfg, events));
}

QueuePair::QueuePair(Engine *engine, MrTable *mrs, const QpConfig &cfg,
                     FdQueue<rpma_conn_event> *events)
    : rc::QueuePair(engine, mrs, cfg, events) {
    main_.io = &main_sock_;
    join_.io = &join_sock_;
}

void QueuePair::setup_events(Stream &s, uint32_t events) {
    Cm cm;
    {
        std::lock_guard lk(cm_mu_);
        cm = cm_;
    }
    if (cm == Cm::kConnecting || !s.connected) {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) handshake_out(s);
        return;
    }
    if (&s == &main_)
        handshake_in();
    else if (events & (EPOLLHUP | EPOLLERR))
        remove_stream(s);  // reset: the main stream reports the outcome
}

int QueuePair::connect(const void *pdata, uint8_t pdata_len) {
    const sockaddr_storage &addr = remote_addr_;
    is_client_ = true;
    main_.answers_in = true;
    token_ = random_token();
    if (pdata_len)
        local_pdata_.assign(static_cast<const uint8_t *>(pdata),
                            static_cast<const uint8_t *>(pdata) + pdata_len);
    // deadline_ is under cm_mu_: once a stream is registered, handshake_out may move it
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(cfg_.timeout_ms);
    {
        std::lock_guard lk(cm_mu_);
        cm_ = Cm::kConnecting;
        deadline_ = deadline;
    }
    for (Stream *s : {&main_, &join_}) {
        s->fd.reset(::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!s->fd.valid()) {
            RPMA_LOG_ERROR("socket: %m");
            return RPMA_E_PROVIDER;
        }
        set_socket_options(s->fd.get());
        // Our ephemeral port then lingers in TIME_WAIT without blocking a later listen on it.
        int one = 1;
        ::setsockopt(s->fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        int r = ::connect(s->fd.get(), reinterpret_cast<const sockaddr *>(&addr), remote_addr_len_);
        if (r != 0 && errno != EINPROGRESS) {
            RPMA_LOG_NOTICE("connect: %m");
            fail_connect(errno == ECONNREFUSED ? RPMA_CONN_REJECTED : RPMA_CONN_UNREACHABLE);
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
    int err = 0;
    socklen_t el = sizeof(err);
    if (::getsockopt(s.fd.get(), SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
    if (err == EINPROGRESS || err == EALREADY) return;
    if (err != 0) {
        RPMA_LOG_NOTICE("connect: %s", strerror(err));
        fail_connect(err == ECONNREFUSED ? RPMA_CONN_REJECTED : RPMA_CONN_UNREACHABLE);
        return;
    }
    Hello h{};
    h.magic = kMagic;
    h.version = kProtocolVersion;
    h.role = static_cast<uint8_t>(&s == &main_ ? StreamRole::kMain : StreamRole::kJoin);
    h.token = token_;
    h.qp_num = qp_num_;
    if (&s == &main_) {
        h.pdata_len = static_cast<uint8_t>(local_pdata_.size());
        if (!local_pdata_.empty()) std::memcpy(h.pdata, local_pdata_.data(), local_pdata_.size());
        if (!make_offer(h)) {
            fail_connect(RPMA_CONN_UNREACHABLE);
            return;
        }
    }
    if (!write_all_small(*s.io, &h, sizeof(h))) {
        RPMA_LOG_NOTICE("sending the connection request failed: %m");
        fail_connect(RPMA_CONN_UNREACHABLE);
        return;
    }
    {
        std::lock_guard lk(s.mu);
        s.connected = true;
        s.want_out = false;
        // The join stream waits for the answer on the main one: the server may send on it (even
        // its Disconnect and end of stream) as soon as it has accepted.
        s.rx_on = &s == &main_;
        update_mask(s);
    }
    std::lock_guard lk(cm_mu_);
    if (cm_ == Cm::kConnecting && main_.connected && join_.connected) {
        cm_ = Cm::kAwaitReply;
        deadline_ = Clock::now() + kReplyTimeout;
        engine_->add_timer(deadline_, weak_from_this());
    }
}

void QueuePair::handshake_in() {
    char *p = reinterpret_cast<char *>(&reply_) + reply_got_;
    iovec into{p, sizeof(reply_) - reply_got_};
    ssize_t r = main_.io->readv(&into, 1);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {
        RPMA_LOG_NOTICE("the server closed the connection before answering");
        fail_connect(RPMA_CONN_REJECTED);
        return;
    }
    reply_got_ += static_cast<size_t>(r);
    if (reply_got_ < sizeof(reply_)) return;
    if (reply_.magic != kMagic || reply_.pdata_len > kAcceptPdataMax ||
        (reply_.kind != static_cast<uint8_t>(ReplyKind::kAccept) &&
         reply_.kind != static_cast<uint8_t>(ReplyKind::kReject))) {
        RPMA_LOG_ERROR("malformed answer to the connection request");
        fail_connect(RPMA_CONN_LOST);
        return;
    }
    if (reply_.kind == static_cast<uint8_t>(ReplyKind::kReject)) {
        fail_connect(RPMA_CONN_REJECTED);
        return;
    }
    remote_qp_ = reply_.qp_num;
    remote_pdata_ = delivered_pdata(reply_.pdata, reply_.pdata_len);
    if (shm_ && !(reply_.flags & kReplyShm)) {
        shm_.reset();
        if (prov::provider_choice() == prov::Choice::kShm) {
            RPMA_LOG_ERROR("RPMA_PROVIDER=shm: the server keeps this connection on tcp");
            fail_connect(RPMA_CONN_REJECTED);
            return;
        }
        RPMA_LOG_INFO("the connection stays on tcp: the server did not take the offer");
    }
    if (shm_ && !move_to_shm()) {
        fail_connect(RPMA_CONN_LOST);
        return;
    }
    {
        std::lock_guard lk(cm_mu_);
        if (cm_ != Cm::kAwaitReply) return;
        cm_ = Cm::kEstablished;
    }
    post_event(RPMA_CONN_ESTABLISHED);
    std::lock_guard lk(join_.mu);
    join_.rx_on = true;
    update_mask(join_);
}

int QueuePair::accept(std::unique_ptr<prov::IncomingRequest> req, const void *pdata,
                      uint8_t pdata_len) {
    // the domain's listener made every request it is handed back
    IncomingConn &in = static_cast<Incoming *>(req.get())->conn;
    is_client_ = false;
    join_.answers_in = true;
    remote_qp_ = in.qp_num;
    remote_pdata_ = std::move(in.pdata);
    Fd tcp_main = std::move(in.main);  // for the Reply; the streams run on shm_ when set
    shm_ = std::move(in.shm);
    if (!shm_) {
        main_.fd = std::move(tcp_main);
        join_.fd = std::move(in.join);
    }
    // ESTABLISHED is queued and the streams are served before the client hears the answer, so
    // whatever the client does next (even a disconnect) lands after it.
    {
        std::lock_guard lk(cm_mu_);
        cm_ = Cm::kEstablished;
    }
    post_event(RPMA_CONN_ESTABLISHED);
    for (Stream *s : {&main_, &join_}) {
        {
            std::lock_guard lk(s->mu);
            s->connected = true;
            s->rx_on = true;
        }
        if (shm_) continue;
        set_socket_options(s->fd.get());
        if (!establish_stream(*s, EPOLLIN | EPOLLRDHUP)) return RPMA_E_PROVIDER;
    }
    // the rings are served before the client learns of them
    if (shm_ && !move_to_shm()) return RPMA_E_PROVIDER;
    Reply rep{};
    rep.magic = kMagic;
    rep.kind = static_cast<uint8_t>(ReplyKind::kAccept);
    rep.pdata_len = pdata_len;
    rep.flags = shm_ ? kReplyShm : 0;
    rep.qp_num = qp_num_;
    if (pdata_len) std::memcpy(rep.pdata, pdata, pdata_len);
    // Nothing else is written on the main stream before the client has this answer.
    SocketStream tcp(shm_ ? &tcp_main : &main_.fd);
    if (!write_all_small(tcp, &rep, sizeof(rep))) lost("sending the accept failed");
    return 0;
}

bool QueuePair::make_offer(Hello &h) {
    prov::Choice choice = prov::provider_choice();
    if (choice == prov::Choice::kTcp) return true;
    std::string why;
    shm_ = shm::Link::offer(main_.fd.get(), token_, &why);
    if (shm_) {
        h.flags |= kHelloShmOffer;
        return true;
    }
    if (choice == prov::Choice::kShm) {
        RPMA_LOG_ERROR("RPMA_PROVIDER=shm: this connection cannot use shared memory (%s)",
                       why.c_str());
        return false;
    }
    RPMA_LOG_INFO("the connection stays on tcp: %s", why.c_str());
    return true;
}

bool QueuePair::move_to_shm() {
    for (Stream *s : {&main_, &join_}) {
        bool main = s == &main_;
        remove_stream(*s);  // the tcp socket's registration, on the client
        {
            std::lock_guard lk(s->mu);  // a posting thread may look at them (update_mask)
            s->fd = shm_->take_wake(main);
            s->owned_io = shm_->stream(main, s->fd.get());
            s->io = s->owned_io.get();
        }
        if (!establish_stream(*s, EPOLLIN)) return false;
    }
    uint64_t key = engine_->add(shm_->ctl_fd(), EPOLLIN | EPOLLRDHUP, shared_from_this());
    ctl_key_.store(key);
    return key != 0;
}

void QueuePair::other_events(int fd, uint32_t) {
    if (!shm_ || fd != shm_->ctl_fd()) return;
    char b[64];
    ssize_t r = ::recv(fd, b, sizeof(b), MSG_DONTWAIT);
    if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR))) return;  // nothing is sent here
    // The peer's process closed its end, or died: each stream ends once what the peer wrote
    // into its ring is read, so an orderly close that got that far still ends as CLOSED.
    // (an event before move_to_shm stored the key comes again: the fd stays readable)
    if (uint64_t key = ctl_key_.exchange(0)) engine_->remove(key);
    shm_->peer_gone();
    // streams the engine does not watch (stalled, or read by a waiter) learn it here
    for (Stream *s : {&main_, &join_}) on_events(s->fd.get(), EPOLLIN | EPOLLRDHUP);
}

void QueuePair::stream_removed() {
    for (Stream *s : {&main_, &join_}) {
        std::lock_guard lk(s->mu);
        if (s->key) return;
    }
    // the registration holds this queue pair alive: it goes with the streams
    if (uint64_t key = ctl_key_.exchange(0)) engine_->remove(key);
}

void QueuePair::reject(Fd &main) {
    Reply rep{};
    rep.magic = kMagic;
    rep.kind = static_cast<uint8_t>(ReplyKind::kReject);
    SocketStream io(&main);
    write_all_small(io, &rep, sizeof(rep));
}

}  // namespace rpma::tcp
