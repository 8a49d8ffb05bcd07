#include "provider/tcp/queue_pair.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "common/log.h"
#include "provider/soft/cq.h"
#include "provider/soft/mr_table.h"
#include "provider/tcp/listener.h"
#include "provider/tcp/persist.h"

namespace rpma::tcp {

namespace {

constexpr size_t kStagingSize = 16 * 1024;
constexpr size_t kDirectThreshold = 4096;  // payloads this big bypass the staging buffer
constexpr int kMaxIov = 64;
// Reads per call: small, so the engine round-robins between streams (level-triggered epoll
// brings it back). A stream that kept the engine for long would delay the answers on the
// other streams, and a peer waiting for them would fill its send queue.
constexpr int kRxBudget = 2;
constexpr auto kReplyTimeout = std::chrono::seconds(30);
// How long a deleted connection waits for the peer to take our Disconnect and close its end.
constexpr auto kLingerTimeout = std::chrono::seconds(2);
// Answers queued behind a full socket before the responder stops taking requests: a peer that
// does not read its answers stalls only its own connection, never our memory.
constexpr size_t kMaxQueuedAnswers = 64;

// QP numbers: unique within a process (a counter), and mixed with the pid so that processes
// forked from one parent, or started together, do not all count from the same place.
uint32_t next_qp_num() {
    static std::atomic<uint32_t> counter{1};
    uint32_t mix = static_cast<uint32_t>(getpid()) * 2654435761u;
    uint32_t v;
    do {
        v = (counter.fetch_add(1) ^ (mix >> 8)) & 0xffffffu;  // 24 bits, as on InfiniBand
    } while (v == 0);                                         // QP 0 is special on InfiniBand
    return v;
}

uint64_t random_token() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    return rng();
}

// Bytes that go nowhere (skipped payloads) land here; nobody reads them, so one buffer serves
// every thread.
char g_discard[64 * 1024];
// The rest of a request whose source was deregistered mid-send goes out as zeros.
const char g_zero[64 * 1024] = {};

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

void set_socket_options(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int ms = dead_peer_timeout_ms();
    unsigned user_timeout = static_cast<unsigned>(ms);
    int idle = std::max(1, ms / 3000), intvl = std::max(1, ms / 9000), cnt = 3;
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

bool write_all_small(int fd, const void *p, size_t n) {
    // Only for the handshake: a fresh socket's buffer always takes a few hundred bytes.
    ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    return r == static_cast<ssize_t>(n);
}

ibv_wc_status nak_to_status(uint16_t st) {
    switch (static_cast<NakStatus>(st)) {
        case NakStatus::kAccess:
            return IBV_WC_REM_ACCESS_ERR;
        case NakStatus::kInvalidRequest:
            return IBV_WC_REM_INV_REQ_ERR;
        default:
            return IBV_WC_REM_OP_ERR;
    }
}

ibv_wc_opcode wc_opcode(Op op) {
    switch (op) {
        case Op::kRead:
        case Op::kFlush:  // a flush completes as the read that implements it on RDMA
            return IBV_WC_RDMA_READ;
        case Op::kSend:
        case Op::kSendImm:
            return IBV_WC_SEND;
        default:
            return IBV_WC_RDMA_WRITE;
    }
}

}  // namespace

std::shared_ptr<QueuePair> QueuePair::create(Engine *engine, MrTable *mrs, const QpConfig &cfg,
                                             FdQueue<rpma_conn_event> *events) {
    return std::shared_ptr<QueuePair>(new QueuePair(engine, mrs, cfg, events));
}

QueuePair::QueuePair(Engine *engine, MrTable *mrs, const QpConfig &cfg,
                     FdQueue<rpma_conn_event> *events)
    : engine_(engine),
      mrs_(mrs),
      cfg_(cfg),
      events_(events),
      qp_num_(next_qp_num()),
      rq_(cfg.rq_size) {}

QueuePair::~QueuePair() = default;

// ---------------------------------------------------------------- connection management

int QueuePair::connect(const void *pdata, uint8_t pdata_len) {
    const sockaddr_storage &addr = remote_addr_;
    is_client_ = true;
    main_.is_request_stream = true;
    token_ = random_token();
    if (pdata_len)
        local_pdata_.assign(static_cast<const uint8_t *>(pdata),
                            static_cast<const uint8_t *>(pdata) + pdata_len);
    {
        std::lock_guard lk(cm_mu_);
        cm_ = Cm::kConnecting;
        deadline_ = Clock::now() + std::chrono::milliseconds(cfg_.timeout_ms);
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
        s->buf.reset(new char[kStagingSize]);
        int r = ::connect(s->fd.get(), reinterpret_cast<const sockaddr *>(&addr), remote_addr_len_);
        if (r != 0 && errno != EINPROGRESS) {
            RPMA_LOG_NOTICE("connect: %m");
            fail_connect(errno == ECONNREFUSED ? RPMA_CONN_REJECTED : RPMA_CONN_UNREACHABLE);
            return 0;
        }
    }
    auto self = shared_from_this();
    for (Stream *s : {&main_, &join_}) {
        {
            std::lock_guard lk(s->mu);
            s->want_out = true;  // connect completion shows as writability
        }
        // No QP lock across add(): it waits for the engine thread, which may need one.
        uint64_t key = engine_->add(s->fd.get(), EPOLLOUT, self);
        if (key == 0) return RPMA_E_PROVIDER;
        std::lock_guard lk(s->mu);
        s->key = key;
        update_mask(*s);  // the engine may have moved on while the key was unknown
    }
    engine_->add_timer(deadline_, weak_from_this());
    return 0;
}

void QueuePair::fail_connect(rpma_conn_event ev) {
    {
        std::lock_guard lk(cm_mu_);
        if (cm_ == Cm::kDone) return;
        cm_ = Cm::kDone;
    }
    {
        std::lock_guard lk(sq_mu_);
        flush_all_locked();
    }
    remove_stream(main_);
    remove_stream(join_);
    post_event(ev);
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
    }
    if (!write_all_small(s.fd.get(), &h, sizeof(h))) {
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
    ssize_t r = ::recv(main_.fd.get(), p, sizeof(reply_) - reply_got_, MSG_DONTWAIT);
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
    remote_pdata_.assign(reply_.pdata, reply_.pdata + reply_.pdata_len);
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
    join_.is_request_stream = true;
    remote_qp_ = in.qp_num;
    remote_pdata_ = std::move(in.pdata);
    main_.fd = std::move(in.main);
    join_.fd = std::move(in.join);
    // ESTABLISHED is queued and the streams are served before the client hears the answer, so
    // whatever the client does next (even a disconnect) lands after it.
    {
        std::lock_guard lk(cm_mu_);
        cm_ = Cm::kEstablished;
    }
    post_event(RPMA_CONN_ESTABLISHED);
    auto self = shared_from_this();
    for (Stream *s : {&main_, &join_}) {
        set_socket_options(s->fd.get());
        s->buf.reset(new char[kStagingSize]);
        {
            std::lock_guard lk(s->mu);
            s->connected = true;
            s->rx_on = true;
        }
        // No QP lock across add(): it waits for the engine thread, which may need one.
        uint64_t key = engine_->add(s->fd.get(), EPOLLIN | EPOLLRDHUP, self);
        if (key == 0) return RPMA_E_PROVIDER;
        std::lock_guard lk(s->mu);
        s->key = key;
        update_mask(*s);
    }
    Reply rep{};
    rep.magic = kMagic;
    rep.kind = static_cast<uint8_t>(ReplyKind::kAccept);
    rep.pdata_len = pdata_len;
    rep.qp_num = qp_num_;
    if (pdata_len) std::memcpy(rep.pdata, pdata, pdata_len);
    // Nothing else is written on the main stream before the client has this answer.
    if (!write_all_small(main_.fd.get(), &rep, sizeof(rep))) lost("sending the accept failed");
    return 0;
}

void QueuePair::reject(Fd &main) {
    Reply rep{};
    rep.magic = kMagic;
    rep.kind = static_cast<uint8_t>(ReplyKind::kReject);
    write_all_small(main.get(), &rep, sizeof(rep));
}

void QueuePair::on_timer() {
    Cm cm;
    Clock::time_point dl;
    {
        std::lock_guard lk(cm_mu_);
        cm = cm_;
        dl = deadline_;
    }
    if (cm == Cm::kClosing) {
        if (Clock::now() < dl) return;
        remove_stream(main_);  // the peer never closed its end: give up on it
        remove_stream(join_);
        return;
    }
    if (closed_) return;
    if ((cm == Cm::kConnecting || cm == Cm::kAwaitReply) && Clock::now() >= dl) {
        RPMA_LOG_NOTICE("connection set-up timed out");
        fail_connect(RPMA_CONN_UNREACHABLE);
    }
}

void QueuePair::remove_stream(Stream &s) {
    uint64_t key;
    {
        std::lock_guard lk(s.mu);
        key = std::exchange(s.key, 0);
    }
    if (key) engine_->remove(key);
}

void QueuePair::close() {
    cfg_.cq->set_driver(nullptr);  // a waiter on the CQ no longer drives this queue pair
    // On the engine thread, as a barrier: work already queued for it has run once this returns,
    // and anything queued later sees closed_, so nothing touches the CQs the caller frees next.
    engine_->run_sync([this] { close_on_engine(); });
}

void QueuePair::close_on_engine() {
    closed_.store(true);
    bool graceful;
    {
        std::lock_guard lk(cm_mu_);
        graceful = cm_ == Cm::kEstablished;
        cm_ = graceful ? Cm::kClosing : Cm::kDone;
        disc_sent_ = true;
        deadline_ = Clock::now() + kLingerTimeout;
    }
    {
        std::lock_guard lk(sq_mu_);
        error_ = true;
        outstanding_.clear();  // nobody is left to see their completions
    }
    if (!graceful) {
        remove_stream(main_);
        remove_stream(join_);
        return;
    }
    // Deleting a live connection closes it as rdma_disconnect would: the peer gets CLOSED. What
    // is queued must not reach for the application's memory once delete returns.
    bool disc = disc_done_;
    disc_done_ = true;
    for (Stream *s : {&main_, &join_}) {
        std::lock_guard lk(s->mu);
        settle_for_close(*s);
        if (!disc) {
            FrameHeader h{};
            h.op = static_cast<uint8_t>(Op::kDisconnect);
            enqueue(*s, TxItem{h, nullptr, 0, nullptr, nullptr});
        }
        s->rx_on = s->key != 0;
        s->stalled = s->backoff = false;  // from now on the peer's input is only drained
        if (flush_tx(*s) && s->txq.empty()) {
            ::shutdown(s->fd.get(), SHUT_WR);
            s->wr_shut = true;
        }
        update_mask(*s);
    }
    engine_->add_timer(deadline_, weak_from_this());
}

void QueuePair::settle_for_close(Stream &s) {
    bool answers = &s == &resp();
    uint64_t limit = UINT64_MAX;  // answers: the last request whose answer still goes out
    for (auto it = s.txq.begin(); it != s.txq.end();) {
        bool started = it == s.txq.begin() && s.tx_off > 0;
        Op op = static_cast<Op>(it->hdr.op);
        if (started) {
            // The frame half sent is finished, from its region while the region lives (it
            // belongs to the peer, not to the connection); see flush_tx for a region that dies.
            ++it;
            continue;
        }
        bool drop;
        if (!answers)
            drop = is_request(it->hdr.op);  // never seen by the peer: it flushes them anyway
        else if (op == Op::kReadResp && it->guard && limit == UINT64_MAX)
            limit = it->hdr.aux - 1, drop = true;
        else
            drop = limit != UINT64_MAX && op != Op::kDisconnect && op != Op::kAck;
        if (answers && !drop && op == Op::kAck && limit != UINT64_MAX) {
            it->hdr.aux = std::min(it->hdr.aux, limit);  // never acknowledge a dropped read
            drop = it->hdr.aux == 0;
        }
        if (drop) {
            if (it->guard) --s.data_items;
            it = s.txq.erase(it);
        } else {
            ++it;
        }
    }
    if (answers && !resp_error_) {
        uint64_t last = std::min(resp_seq_.load(), limit);
        if (last > resp_acked_) {
            FrameHeader a{};
            a.op = static_cast<uint8_t>(Op::kAck);
            a.aux = last;
            resp_acked_ = last;
            // before a Disconnect already queued, so the peer counts it
            auto pos = std::find_if(s.txq.begin(), s.txq.end(), [](const TxItem &t) {
                return t.hdr.op == static_cast<uint8_t>(Op::kDisconnect);
            });
            if (pos == s.txq.begin() && s.tx_off > 0) ++pos;
            s.txq.insert(pos, TxItem{a, nullptr, 0, nullptr, nullptr});
        }
    }
}

void QueuePair::linger_events(Stream &s, uint32_t events) {
    bool done = false;
    {
        std::lock_guard lk(s.mu);
        if (!s.key) return;
        if ((events & EPOLLOUT) || !s.txq.empty()) {
            if (!flush_tx(s)) {
                // half a read answer is out and its region is gone: only a broken connection
                // keeps the peer from using what it got
                ::shutdown(main_.fd.get(), SHUT_RDWR);
                ::shutdown(join_.fd.get(), SHUT_RDWR);
                done = true;
            }
        }
        if (!done && s.txq.empty() && !s.wr_shut) {
            ::shutdown(s.fd.get(), SHUT_WR);
            s.wr_shut = true;
        }
    }
    // The peer's input is read and dropped until it closes its end: closing a socket with
    // unread input would reset the connection and could destroy our Disconnect on the way.
    while (!done && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        ssize_t n = ::recv(s.fd.get(), g_discard, sizeof(g_discard), MSG_DONTWAIT);
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        done = true;
    }
    if (done) remove_stream(s);
}

void QueuePair::lost(const char *why) {
    {
        std::lock_guard lk(cm_mu_);
        if (cm_ == Cm::kDone || cm_ == Cm::kClosing) return;
        cm_ = Cm::kDone;
    }
    RPMA_LOG_NOTICE("connection lost: %s", why);
    {
        std::lock_guard lk(sq_mu_);
        if (!error_ && !outstanding_.empty() && source_faulted(outstanding_.front().seq)) {
            // a message half sent from a dead region ended the connection: it fails first, as
            // the NIC reports it
            Outstanding o = std::move(outstanding_.front());
            outstanding_.pop_front();
            push_send_wc(o, IBV_WC_LOC_PROT_ERR, 0);
        }
        flush_all_locked();
    }
    remove_stream(main_);
    remove_stream(join_);
    // The peer learns at once (end of stream) instead of at its dead-peer timeout.
    for (Stream *s : {&main_, &join_})
        if (s->fd.valid()) ::shutdown(s->fd.get(), SHUT_RDWR);
    post_event(RPMA_CONN_LOST);
}

void QueuePair::append_ack(Stream &s) {
    uint64_t seq = resp_seq_.load(std::memory_order_relaxed);
    resp_acked_ = seq;
    ack_wanted_ = false;
    // ACKs are cumulative: one still waiting in the queue is raised instead of adding another,
    // so a peer that does not read its answers cannot grow the queue with them.
    if (!s.txq.empty() && s.txq.back().hdr.op == static_cast<uint8_t>(Op::kAck) &&
        !(s.txq.size() == 1 && s.tx_off > 0)) {
        s.txq.back().hdr.aux = seq;
        return;
    }
    FrameHeader a{};
    a.op = static_cast<uint8_t>(Op::kAck);
    a.aux = seq;
    enqueue(s, TxItem{a, nullptr, 0, nullptr, nullptr});
}

void QueuePair::send_disconnect() {
    // Runs on the engine thread, which owns the responder state: everything executed is
    // acknowledged before the stream ends, so the peer never flushes work that was done.
    FrameHeader h{};
    h.op = static_cast<uint8_t>(Op::kDisconnect);
    if (disc_done_) return;
    disc_done_ = true;
    for (Stream *s : {&main_, &join_}) {
        std::lock_guard lk(s->mu);
        if (s == &resp() && !resp_error_ && resp_seq_ > resp_acked_) append_ack(*s);
        enqueue(*s, TxItem{h, nullptr, 0, nullptr, nullptr});
        flush_tx(*s);
    }
}

int QueuePair::disconnect() {
    {
        std::lock_guard lk(cm_mu_);
        if (cm_ != Cm::kEstablished || disc_sent_) return 0;
        disc_sent_ = true;
    }
    engine_->post([w = weak_from_this()] {
        auto self = w.lock();
        if (self && !self->closed_) self->send_disconnect();
    });
    return 0;
}

void QueuePair::maybe_closed() {
    {
        std::lock_guard lk(cm_mu_);
        if (cm_ != Cm::kEstablished) return;
        if (!disc_sent_) {
            disc_sent_ = true;  // answer the peer's disconnect, as a DREP would
            if (engine_->in_loop()) {
                send_disconnect();
            } else {
                engine_->post([w = weak_from_this()] {
                    auto self = w.lock();
                    if (self && !self->closed_) self->send_disconnect();
                });
            }
        }
        if (!(main_.disc_rx && join_.disc_rx)) return;
        cm_ = Cm::kDone;
    }
    {
        std::lock_guard lk(sq_mu_);
        flush_all_locked();
    }
    for (Stream *s : {&main_, &join_}) {
        bool idle;
        {
            std::lock_guard lk(s->mu);
            idle = s->txq.empty();
        }
        if (idle) remove_stream(*s);  // else the engine removes it once the queue drains
    }
    post_event(RPMA_CONN_CLOSED);
}

// ---------------------------------------------------------------- transmit

void QueuePair::enqueue(Stream &s, TxItem item) {
    if (item.guard) ++s.data_items;
    s.txq.push_back(std::move(item));
}

void QueuePair::update_mask(Stream &s) {
    if (!s.key) return;
    uint32_t m = 0;
    if (s.rx_on) m |= s.stalled || s.backoff ? EPOLLRDHUP : EPOLLIN | EPOLLRDHUP;
    if (s.want_out) m |= EPOLLOUT;
    engine_->modify(s.fd.get(), s.key, m);
}

bool QueuePair::region_vanished(Stream &s, TxItem &it) {
    bool started = &it == &s.txq.front() && s.tx_off > 0;
    bool message = it.hdr.op == static_cast<uint8_t>(Op::kSend) ||
                   it.hdr.op == static_cast<uint8_t>(Op::kSendImm);
    if (is_request(it.hdr.op)) {
        // The source was deregistered: the request completes with LOC_PROT_ERR in its turn. A
        // frame not yet begun becomes an empty write the peer acknowledges; a write half sent
        // is finished with zeros (the target range is then undefined, as after a failed RDMA
        // write). A message half sent ends the connection: finished, it would complete the
        // peer's receive, which on a NIC never sees its last packet and is flushed.
        if (started && message && s.why) return false;  // found before; the stream is down
        s.src_faults.push_back(it.seq);
        faults_.fetch_add(1, std::memory_order_release);
        if (started && message) {
            RPMA_LOG_ERROR("a region was deregistered under a message in progress");
            s.why = "a region was deregistered under a message in progress";
            return false;
        }
        if (!started) {
            it.hdr.op = static_cast<uint8_t>(Op::kWrite);
            it.hdr.flags = kAckRequested;
            it.hdr.length = 0;
            it.hdr.rkey = 0;
            it.hdr.addr = 0;
            it.len = 0;
        } else {
            it.zero_fill = true;
        }
        it.data = nullptr;
    } else if (!started && it.hdr.op == static_cast<uint8_t>(Op::kReadResp)) {
        // A read whose source was deregistered before its answer began fails as an access
        // error; the responder then enters the error state.
        it.hdr.op = static_cast<uint8_t>(Op::kNak);
        it.hdr.status = static_cast<uint16_t>(NakStatus::kAccess);
        it.hdr.length = 0;
        it.len = 0;
        it.data = nullptr;
        s.nak_queued = true;
    } else {
        // Half an answer is out: only ending the connection keeps the peer from using it.
        RPMA_LOG_ERROR("a region was deregistered while the peer read it");
        s.why = "a region was deregistered under a read answer in progress";
        return false;
    }
    it.guard.reset();
    --s.data_items;
    return true;
}

bool QueuePair::flush_tx(Stream &s) {
    while (!s.txq.empty()) {
        iovec iov[kMaxIov];
        Region *held[kMaxIov];
        int niov = 0, nheld = 0;
        TxItem *dead = nullptr;
        size_t off = s.tx_off;
        for (auto it = s.txq.begin(); it != s.txq.end() && niov + 2 <= kMaxIov; ++it) {
            if (off < kHeaderSize) {
                iov[niov++] = {reinterpret_cast<char *>(&it->hdr) + off, kHeaderSize - off};
                off = 0;
            } else {
                off -= kHeaderSize;
            }
            if (it->len > off) {
                if (it->zero_fill) {
                    size_t n = std::min(it->len - off, sizeof(g_zero));
                    iov[niov++] = {const_cast<char *>(g_zero), n};
                    if (n < it->len - off) break;
                    off = 0;
                    continue;
                }
                if (it->guard) {
                    // Held across the send: deregistration waits for it, and after it no
                    // byte of the region is read.
                    if (!it->guard->acquire()) {
                        dead = &*it;
                        break;
                    }
                    held[nheld++] = it->guard.get();
                }
                iov[niov++] = {const_cast<char *>(it->data) + off, it->len - off};
            }
            off = 0;
        }
        ssize_t n = -1;
        int err = 0;
        if (!dead) {
            msghdr msg{};
            msg.msg_iov = iov;
            msg.msg_iovlen = static_cast<size_t>(niov);
            n = ::sendmsg(s.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
            err = errno;
        }
        for (int i = 0; i < nheld; ++i) held[i]->release();
        if (dead) {
            if (!region_vanished(s, *dead)) {
                // the engine sees the end of the stream even when an application thread's
                // post found this
                ::shutdown(s.fd.get(), SHUT_RDWR);
                return false;
            }
            continue;
        }
        if (n < 0) {
            if (err == EINTR) continue;
            if (err == EAGAIN) {
                if (!s.want_out) {
                    s.want_out = true;
                    update_mask(s);
                }
                return true;
            }
            s.why = strerror(err);
            return false;
        }
        size_t done = static_cast<size_t>(n);
        while (done > 0) {
            size_t left = kHeaderSize + s.txq.front().len - s.tx_off;
            if (done >= left) {
                done -= left;
                if (s.txq.front().guard) --s.data_items;
                s.txq.pop_front();
                s.tx_off = 0;
            } else {
                s.tx_off += done;
                done = 0;
            }
        }
    }
    if (s.want_out) {
        s.want_out = false;
        update_mask(s);
    }
    return true;
}

void QueuePair::send_frame(Stream &s, const FrameHeader &h) {
    std::lock_guard lk(s.mu);
    enqueue(s, TxItem{h, nullptr, 0, nullptr, nullptr});
    flush_tx(s);  // a broken stream shows up on the receive side as well
}

int QueuePair::post_send(prov::SendWr w) {
    static constexpr Op kOp[] = {Op::kWrite, Op::kWriteImm, Op::kRead,   Op::kAtomicWrite,
                                 Op::kFlush, Op::kSend,     Op::kSendImm};
    SendWr wr;
    wr.op = kOp[static_cast<int>(w.op)];
    wr.wr_id = w.wr_id;
    wr.signaled = w.signaled;
    wr.local = w.local;
    wr.len = w.len;
    wr.local_region = std::static_pointer_cast<Region>(std::move(w.local_region));
    wr.local_fault = w.local_fault;
    wr.raddr = w.raddr;
    wr.rkey = w.rkey;
    wr.imm = w.imm;
    wr.value = w.value;
    wr.flags = w.persistent ? kFlushPersistent : 0;
    return post_send(std::move(wr));
}

int QueuePair::post_send(SendWr wr) {
    // In a forked child the sockets are the parent's: a frame from here would corrupt its stream.
    if (int ret = engine_->check_process("the connection")) return ret;
    std::lock_guard lk(sq_mu_);
    Cm cm;
    bool disc;
    {
        std::lock_guard clk(cm_mu_);
        cm = cm_;
        disc = disc_sent_;
    }
    if (cm == Cm::kIdle || cm == Cm::kConnecting || cm == Cm::kAwaitReply) {
        RPMA_LOG_ERROR("the connection is not established yet");
        return RPMA_E_PROVIDER;
    }
    if (error_ || cm == Cm::kDone || cm == Cm::kClosing || disc) {
        // as verbs: a QP in the error state takes the request and flushes it
        push_send_wc(Outstanding{0, wr.wr_id, wr.op, wr.signaled, nullptr, 0, nullptr},
                     IBV_WC_WR_FLUSH_ERR, 0);
        return 0;
    }
    if (outstanding_.size() + unreclaimed_ >= cfg_.sq_size) {
        RPMA_LOG_ERROR(
            "send queue full (%u entries: %zu in flight from #%llu, %u done "
            "unsignaled); signal a completion more often",
            cfg_.sq_size, outstanding_.size(),
            static_cast<unsigned long long>(outstanding_.empty() ? 0 : outstanding_.front().seq),
            unreclaimed_);
        return RPMA_E_PROVIDER;
    }
    uint64_t seq = next_seq_++;
    bool is_read = wr.op == Op::kRead;
    outstanding_.push_back(
        Outstanding{seq, wr.wr_id, wr.op, wr.signaled, is_read ? wr.local : nullptr, wr.len,
                    is_read ? std::move(wr.local_region) : nullptr, wr.local_fault});
    FrameHeader h{};
    h.op = static_cast<uint8_t>(wr.op);
    h.flags = wr.flags;
    // Only signaled requests need a prompt ACK; unsignaled ones ask now and then to free slots.
    if (wr.signaled || ++unsignaled_run_ >= std::max(1u, cfg_.sq_size / 2)) {
        h.flags |= kAckRequested;
        unsignaled_run_ = 0;
    }
    h.imm = wr.imm;
    h.length = wr.len;
    h.rkey = wr.rkey;
    h.addr = wr.raddr;
    h.aux = wr.value;
    bool carries = !wr.local_fault && (wr.op == Op::kWrite || wr.op == Op::kWriteImm ||
                                       wr.op == Op::kSend || wr.op == Op::kSendImm);
    if (wr.local_fault) {
        // An empty write holds the request's place; its ACK completes it with LOC_PROT_ERR.
        h = FrameHeader{};
        h.op = static_cast<uint8_t>(Op::kWrite);
        h.flags = kAckRequested;
    }
    // Everything of the peer's we executed (a receive it reacts to, say) completes at the peer
    // before this request does anything there.
    h.ack = resp_seq_.load(std::memory_order_acquire);
    Stream &s = req();
    std::lock_guard tlk(s.mu);
    // Frames already queued mean the socket is full and the engine sends on EPOLLOUT; this one
    // joins them (and goes out in the same sendmsg) instead of paying for another EAGAIN.
    bool idle = s.txq.empty();
    TxItem item{h, carries ? wr.local : nullptr, carries ? wr.len : 0u, nullptr, nullptr, seq};
    if (carries && wr.len) item.guard = std::move(wr.local_region);
    enqueue(s, std::move(item));
    if (idle) flush_tx(s);
    return 0;
}

int QueuePair::post_recv(PostedRecv r) {
    if (int ret = engine_->check_process("the connection")) return ret;
    if (cfg_.srq) {
        RPMA_LOG_ERROR("the connection receives through a shared RQ; use rpma_srq_recv");
        return RPMA_E_PROVIDER;
    }
    bool err;
    {
        std::lock_guard lk(sq_mu_);
        err = error_;
    }
    if (err) {
        push_recv_wc(r, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, false, 0);
        return 0;
    }
    return rq_.post(std::move(r));
}

// ---------------------------------------------------------------- completions

void QueuePair::push_send_wc(const Outstanding &o, ibv_wc_status st, uint32_t len) {
    if (st == IBV_WC_SUCCESS && !o.signaled) return;
    ibv_wc wc{};
    wc.wr_id = o.wr_id;
    wc.status = st;
    wc.opcode = wc_opcode(o.op);
    wc.byte_len = (st == IBV_WC_SUCCESS && o.op == Op::kRead) ? len : 0;
    wc.qp_num = qp_num_;
    wc.src_qp = remote_qp_;
    cfg_.cq->push(wc);
}

void QueuePair::push_recv_wc(const PostedRecv &r, ibv_wc_status st, ibv_wc_opcode op, uint32_t len,
                             bool with_imm, uint32_t imm) {
    ibv_wc wc{};
    wc.wr_id = r.wr_id;
    wc.status = st;
    wc.opcode = op;
    wc.byte_len = len;
    wc.qp_num = qp_num_;
    wc.src_qp = remote_qp_;
    if (with_imm) {
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm_data = htonl(imm);
    }
    cfg_.recv_cq->push(wc);
}

void QueuePair::complete_front(ibv_wc_status st, uint32_t len) {
    Outstanding o = std::move(outstanding_.front());
    outstanding_.pop_front();
    if (st == IBV_WC_SUCCESS && (o.local_error || source_faulted(o.seq))) {
        // the NIC's local protection error: this request fails, and the QP with it
        push_send_wc(o, IBV_WC_LOC_PROT_ERR, 0);
        flush_all_locked();
        return;
    }
    if (o.signaled)
        unreclaimed_ = 0;
    else
        ++unreclaimed_;
    push_send_wc(o, st, len);
}

bool QueuePair::source_faulted(uint64_t seq) {
    if (faults_.load(std::memory_order_acquire) == 0) return false;
    Stream &s = req();
    std::lock_guard lk(s.mu);
    auto it = std::find(s.src_faults.begin(), s.src_faults.end(), seq);
    if (it == s.src_faults.end()) return false;
    s.src_faults.erase(it);
    faults_.fetch_sub(1, std::memory_order_relaxed);
    return true;
}

void QueuePair::advance_locked() {
    // Reads complete only with their data, and everything after them waits (in order).
    while (!outstanding_.empty() && outstanding_.front().seq <= peer_acked_ &&
           !outstanding_.front().awaits_data())
        complete_front(IBV_WC_SUCCESS, 0);
}

QueuePair::Step QueuePair::apply_peer_ack(uint64_t ack) {
    if (ack <= ack_applied_.load(std::memory_order_relaxed)) return Step::kContinue;
    std::lock_guard lk(sq_mu_);
    if (ack >= next_seq_) {
        RPMA_LOG_ERROR("acknowledgement of request %llu that was never sent",
                       static_cast<unsigned long long>(ack));
        resp().why = "protocol error: acknowledgement of a request never sent";
        return Step::kFatal;
    }
    if (error_) return Step::kContinue;
    peer_acked_ = std::max(peer_acked_, ack);
    advance_locked();
    if (!outstanding_.empty() && outstanding_.front().seq <= ack) {
        // A read the peer answered before this request is still on its way (the other
        // stream): this request waits for it, or its effects would overtake that completion.
        resp_wait_ack_.store(true);
        return Step::kStall;
    }
    ack_applied_.store(ack, std::memory_order_relaxed);
    return Step::kContinue;
}

void QueuePair::wake_ack_waiter_locked() {
    // the responder waits while a read the peer acknowledged has not completed here
    bool caught_up = outstanding_.empty() || outstanding_.front().seq > peer_acked_;
    if (caught_up && resp_wait_ack_.load() && resp_wait_ack_.exchange(false)) resume_responder();
}

void QueuePair::resume_responder() {
    engine_->post([w = weak_from_this()] {
        auto self = w.lock();
        if (self && !self->closed_) self->resume_now();
    });
}

void QueuePair::resume_now() {
    if (!established()) return;
    Stream &s = resp();
    std::lock_guard rl(s.rx_mu);
    {
        std::lock_guard lk(s.mu);
        if (!s.stalled) return;
        s.stalled = false;
        s.drain_wait = false;
        update_mask(s);
    }
    read_stream(s);
}

void QueuePair::fail_recv(ibv_wc_status st) {
    if (!cur_recv_) return;
    // The error state first: whatever the application posts once it sees this is flushed.
    std::lock_guard lk(sq_mu_);
    error_ = true;
    push_recv_wc(*cur_recv_, st, IBV_WC_RECV, 0, false, 0);
    cur_recv_.reset();
}

void QueuePair::flush_all_locked() {
    error_ = true;
    while (!outstanding_.empty()) complete_front(IBV_WC_WR_FLUSH_ERR, 0);
    unreclaimed_ = 0;
    for (auto &r : rq_.drain()) push_recv_wc(r, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, false, 0);
    // a request waiting for a read's completion waits no more: there is nothing to order after
    if (resp_wait_ack_.exchange(false)) resume_responder();
}

// ---------------------------------------------------------------- receive

void QueuePair::on_events(int fd, uint32_t events) {
    Stream &s = fd == main_.fd.get() ? main_ : join_;
    if (s.fd.get() != fd) return;
    Cm cm;
    {
        std::lock_guard lk(cm_mu_);
        cm = cm_;
    }
    if (cm == Cm::kConnecting || (cm == Cm::kAwaitReply && !s.connected)) {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) handshake_out(s);
        return;
    }
    if (cm == Cm::kAwaitReply) {
        if (&s == &main_)
            handshake_in();
        else if (events & (EPOLLHUP | EPOLLERR))
            remove_stream(s);  // reset: the main stream reports the outcome
        return;
    }
    if (cm == Cm::kClosing) {
        linger_events(s, events);
        return;
    }
    if (cm == Cm::kDone || cm == Cm::kIdle) {
        std::lock_guard lk(s.mu);
        if ((events & EPOLLOUT) && flush_tx(s) && !s.txq.empty()) return;
        uint64_t key = std::exchange(s.key, 0);
        if (key) engine_->remove(key);
        return;
    }
    if (events & EPOLLOUT) {
        bool sent, drained = false;
        {
            std::lock_guard lk(s.mu);
            sent = flush_tx(s);
            drained = sent && take_drained(s);
        }
        if (!sent) {
            lost(s.why ? s.why : "send failed");  // not under s.mu: lost() takes it
            return;
        }
        if (&s == &resp()) absorb_queued_nak();
        if (drained) resume_now();  // the request waiting for our answers to leave
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        if (s.stalled && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
            // The stalled request hides what follows it. A Disconnect on the other stream and
            // an orderly end of this one mean the peer closed in order (it deleted the
            // connection while its send waited for a receive).
            Stream &other = &s == &main_ ? join_ : main_;
            if (!other.disc_rx) read_stream_locked(other);
            if (other.disc_rx && !(events & EPOLLERR)) {
                s.disc_rx = true;
                {
                    std::lock_guard lk(s.mu);
                    s.rx_on = false;
                    update_mask(s);
                }
                maybe_closed();
                return;
            }
            lost("the peer went away while its send waited for a receive");
            return;
        }
        read_stream_locked(s);
    }
}

void QueuePair::read_stream_locked(Stream &s) {
    std::unique_lock rl(s.rx_mu, std::try_to_lock);
    if (!rl) {
        // A waiting thread drives this stream (drive). Stop polling it here until that thread
        // lets go, then check once more: either it sees backoff, or this try succeeds.
        {
            std::lock_guard lk(s.mu);
            s.backoff = true;
            update_mask(s);
        }
        if (!rl.try_lock()) return;
        std::lock_guard lk(s.mu);
        s.backoff = false;
        update_mask(s);
    }
    read_stream(s);
}

void QueuePair::recv_posted() {
    resume_responder();
}

void QueuePair::drive(int channel_fd) {
    Stream &s = req();
    std::unique_lock rl(s.rx_mu);
    bool ok = established();  // the handshake owns the stream until then
    {
        std::lock_guard lk(s.mu);
        ok = ok && s.key != 0 && s.rx_on;
    }
    if (!ok) rl.unlock();
    // Holding rx_mu across the poll keeps the engine off this stream: one wake-up, not two.
    pollfd p[2] = {{channel_fd, POLLIN, 0}, {s.fd.get(), POLLIN, 0}};
    int n = ::poll(p, ok ? 2 : 1, -1);
    if (!ok) return;
    if (n > 0 && p[1].revents) read_stream(s);
    rl.unlock();
    std::lock_guard lk(s.mu);
    if (s.backoff) {
        s.backoff = false;  // the engine stepped aside for us: hand the stream back
        update_mask(s);
    }
}

bool QueuePair::established() {
    std::lock_guard lk(cm_mu_);
    return cm_ == Cm::kEstablished;
}

void QueuePair::poll_once() {
    Stream &s = req();
    if (!established()) return;  // the handshake owns the stream until then
    std::unique_lock rl(s.rx_mu, std::try_to_lock);
    if (!rl) return;  // someone is reading it already
    {
        std::lock_guard lk(s.mu);
        if (!s.key || !s.rx_on) return;
    }
    read_stream(s);
    rl.unlock();
    std::lock_guard lk(s.mu);
    if (s.backoff) {
        s.backoff = false;
        update_mask(s);
    }
}

void QueuePair::nak(uint64_t seq, NakStatus st) {
    FrameHeader h{};
    h.op = static_cast<uint8_t>(Op::kNak);
    h.status = static_cast<uint16_t>(st);
    h.aux = seq;
    resp_acked_ = seq;
    resp_error_ = true;
    send_frame(resp(), h);
    // The responder's QP goes to the error state too, as an RC QP does.
    std::lock_guard lk(sq_mu_);
    flush_all_locked();
}

QueuePair::Step QueuePair::responder_header(Stream &s, const FrameHeader &h) {
    if (!is_request(h.op)) {
        if (h.op == static_cast<uint8_t>(Op::kDisconnect)) {
            s.disc_rx = true;
            return Step::kStop;
        }
        RPMA_LOG_ERROR("unexpected opcode %u on the request stream", h.op);
        s.why = "protocol error: unexpected opcode";
        return Step::kFatal;
    }
    Op op = static_cast<Op>(h.op);
    if (h.length > kMaxOpLength) {
        RPMA_LOG_ERROR("request of %u bytes exceeds the limit", h.length);
        s.why = "protocol error: oversized request";
        return Step::kFatal;
    }
    // The peer's acknowledgement first: its request may react to a completion of ours.
    if (Step st = apply_peer_ack(h.ack); st != Step::kContinue) return st;
    bool carries = op == Op::kWrite || op == Op::kWriteImm || op == Op::kSend || op == Op::kSendImm;
    // An ACK is due once the request asking for it has executed, not when its header arrives.
    bool wants_ack = h.flags & kAckRequested;
    auto discard_payload = [&] {
        if (carries) {
            s.payload = Payload::kDiscard;
            s.remaining = s.payload_len = h.length;
        }
        return Step::kContinue;
    };
    absorb_queued_nak();
    // In the error state requests are dropped; the stream is read on to its disconnect.
    if (resp_error_) return discard_payload();
    // Reads answered earlier must not see what this request changes, and a peer that does not
    // read its answers must not make us queue more.
    if (Step st = wait_for_answers(op != Op::kRead && op != Op::kFlush); st != Step::kContinue)
        return st;
    if (absorb_queued_nak()) return discard_payload();
    uint64_t seq = resp_seq_ + 1;
    std::shared_ptr<Region> region;
    auto check = [&](int need) -> bool {
        if (h.length == 0 && op != Op::kAtomicWrite) return true;  // 0-byte: no memory touched
        region = mrs_->find(h.rkey);
        return region && (region->usage() & need) && region->contains(h.addr, h.length);
    };
    switch (op) {
        case Op::kWrite:
        case Op::kWriteImm: {
            if (!check(RPMA_MR_USAGE_WRITE_DST)) {
                nak(seq, NakStatus::kAccess);
                return discard_payload();
            }
            if (op == Op::kWriteImm) {
                RecvQueue *q = cfg_.srq ? cfg_.srq : &rq_;
                cur_recv_ = q->take_or_wait(weak_from_this());
                if (!cur_recv_) return Step::kStall;
                cur_imm_ = h.imm;
                cur_has_imm_ = true;
            }
            pending_seq_ = seq;  // executed, and so acknowledged, once the payload is placed
            pending_wants_ack_ = wants_ack;
            s.payload = op == Op::kWrite ? Payload::kWrite : Payload::kWriteImm;
            s.dst = region ? reinterpret_cast<char *>(h.addr) : nullptr;
            s.dst_region = region;
            s.remaining = s.payload_len = h.length;
            return Step::kContinue;
        }
        case Op::kSend:
        case Op::kSendImm: {
            RecvQueue *q = cfg_.srq ? cfg_.srq : &rq_;
            cur_recv_ = q->take_or_wait(weak_from_this());
            if (!cur_recv_) return Step::kStall;
            pending_seq_ = seq;
            pending_wants_ack_ = wants_ack;
            cur_has_imm_ = op == Op::kSendImm;
            cur_imm_ = h.imm;
            if (h.length > cur_recv_->len) {
                RPMA_LOG_WARNING("message of %u bytes for a receive buffer of %u", h.length,
                                 cur_recv_->len);
                fail_recv(IBV_WC_LOC_LEN_ERR);
                nak(seq, NakStatus::kInvalidRequest);
                return discard_payload();
            }
            s.payload = Payload::kSend;
            s.dst = cur_recv_->ptr;
            s.dst_region = cur_recv_->region;
            s.failed = !cur_recv_->usable;  // checked as a NIC checks the lkey: on arrival
            s.remaining = s.payload_len = h.length;
            return Step::kContinue;
        }
        case Op::kRead: {
            if (!check(RPMA_MR_USAGE_READ_SRC)) {
                nak(seq, NakStatus::kAccess);
                return Step::kContinue;
            }
            resp_seq_ = seq;
            resp_acked_ = seq;
            FrameHeader r{};
            r.op = static_cast<uint8_t>(Op::kReadResp);
            r.length = h.length;
            r.aux = seq;
            std::lock_guard lk(resp().mu);
            // zero-copy: the answer is gathered from the region when the socket takes it
            enqueue(resp(), TxItem{r, h.length ? reinterpret_cast<char *>(h.addr) : nullptr,
                                   h.length, h.length ? region : nullptr, nullptr});
            if (resp().txq.size() >= kMaxIov / 2 && !flush_tx(resp())) return Step::kFatal;
            return Step::kContinue;
        }
        case Op::kAtomicWrite: {
            if (h.length != 8 || (h.addr & 7) || !check(RPMA_MR_USAGE_WRITE_DST)) {
                nak(seq, h.length != 8 || (h.addr & 7) ? NakStatus::kInvalidRequest
                                                       : NakStatus::kAccess);
                return Step::kContinue;
            }
            RegionUse use(region.get());
            if (!use.ok()) {
                nak(seq, NakStatus::kAccess);
                return Step::kContinue;
            }
            // one aligned 8-byte store: a concurrent reader sees the old or the new value
            std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(h.addr))
                .store(h.aux, std::memory_order_release);
            resp_seq_ = seq;
            ack_wanted_ |= wants_ack;
            return Step::kContinue;
        }
        case Op::kFlush: {
            int need = (h.flags & kFlushPersistent) ? RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT
                                                    : RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY;
            if (!check(need)) {
                nak(seq, NakStatus::kAccess);
                return Step::kContinue;
            }
            if ((h.flags & kFlushPersistent) && h.length) {
                RegionUse use(region.get());
                if (!use.ok() || persist_range(reinterpret_cast<char *>(h.addr), h.length) != 0) {
                    nak(seq, NakStatus::kOperation);
                    return Step::kContinue;
                }
            }
            resp_seq_ = seq;
            ack_wanted_ |= wants_ack;
            return Step::kContinue;
        }
        default:
            return Step::kFatal;
    }
}

QueuePair::Step QueuePair::completer_header(Stream &s, const FrameHeader &h) {
    Op op = static_cast<Op>(h.op);
    if (op == Op::kDisconnect) {
        s.disc_rx = true;
        return Step::kStop;
    }
    if (op != Op::kAck && op != Op::kReadResp && op != Op::kNak) {
        RPMA_LOG_ERROR("unexpected opcode %u on the answer stream", h.op);
        s.why = "protocol error: unexpected opcode on the answer stream";
        return Step::kFatal;
    }
    std::lock_guard lk(sq_mu_);
    uint64_t seq = h.aux;
    if (seq == 0 || seq >= next_seq_ || h.length > kMaxOpLength) {
        RPMA_LOG_ERROR("answer for request %llu that was never sent",
                       static_cast<unsigned long long>(seq));
        s.why = "protocol error: answer for a request never sent";
        return Step::kFatal;
    }
    if (error_) {
        // flushed already; only a read's data must still be skipped
        if (op == Op::kReadResp) {
            s.payload = Payload::kDiscard;
            s.remaining = s.payload_len = h.length;
        }
        return Step::kContinue;
    }
    // Everything before an answer is done: RC executes in order.
    uint64_t upto = op == Op::kAck ? seq : seq - 1;
    peer_acked_ = std::max(peer_acked_, upto);
    while (!outstanding_.empty() && outstanding_.front().seq <= upto) {
        if (outstanding_.front().awaits_data()) {
            RPMA_LOG_ERROR("a read was acknowledged without its data");
            s.why = "protocol error: a read acknowledged without its data";
            return Step::kFatal;
        }
        complete_front(IBV_WC_SUCCESS, 0);
    }
    if (op == Op::kAck) {
        wake_ack_waiter_locked();
        return Step::kContinue;
    }
    if (error_) return Step::kContinue;  // a local error above flushed the rest
    if (outstanding_.empty() || outstanding_.front().seq != seq) {
        s.why = "protocol error: answer out of order";
        return Step::kFatal;
    }
    if (op == Op::kNak) {
        complete_front(nak_to_status(h.status), 0);
        flush_all_locked();
        return Step::kContinue;
    }
    Outstanding &o = outstanding_.front();
    if (!o.awaits_data() || h.length != o.len) {
        RPMA_LOG_ERROR("read answer does not match the request");
        s.why = "protocol error: read answer does not match the request";
        return Step::kFatal;
    }
    s.payload = Payload::kReadResp;
    s.dst = o.dst;
    s.dst_region = o.dst_region;
    s.remaining = s.payload_len = h.length;
    return Step::kContinue;
}

void QueuePair::payload_done(Stream &s) {
    Payload p = s.payload;
    bool failed = s.failed;
    s.payload = Payload::kNone;
    s.rx = Rx::kHeader;
    s.dst = nullptr;
    s.dst_region.reset();
    s.failed = false;
    uint32_t len = static_cast<uint32_t>(s.payload_len);
    switch (p) {
        case Payload::kWrite:
        case Payload::kWriteImm:
        case Payload::kSend: {
            if (failed) {
                // Not all of it was placed (region deregistered, or a receive buffer it may not
                // use): the receive fails here, and the requester hears it was not done.
                RPMA_LOG_WARNING("%s", p == Payload::kSend ? "receive buffer not usable"
                                                           : "write target deregistered mid-write");
                fail_recv(p == Payload::kSend ? IBV_WC_LOC_PROT_ERR : IBV_WC_WR_FLUSH_ERR);
                nak(pending_seq_, p == Payload::kSend ? NakStatus::kOperation : NakStatus::kAccess);
                break;
            }
            // Executed: the ACK state moves before the application can see the receive, so
            // anything it posts in reaction carries this acknowledgement.
            resp_seq_.store(pending_seq_, std::memory_order_release);
            ack_wanted_ |= pending_wants_ack_;
            if (cur_recv_) {
                ibv_wc_opcode op = p == Payload::kSend ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM;
                push_recv_wc(*cur_recv_, IBV_WC_SUCCESS, op, len, cur_has_imm_, cur_imm_);
                cur_recv_.reset();
            }
            break;
        }
        case Payload::kReadResp: {
            std::lock_guard lk(sq_mu_);
            if (error_ || outstanding_.empty()) break;
            if (failed) {
                complete_front(IBV_WC_LOC_PROT_ERR, 0);  // its destination was deregistered
                flush_all_locked();
                break;
            }
            complete_front(IBV_WC_SUCCESS, len);
            advance_locked();  // what the peer acknowledged behind this read
            wake_ack_waiter_locked();
            break;
        }
        default:
            break;
    }
}

bool QueuePair::answer_now(Stream &s) {
    std::lock_guard lk(s.mu);
    if (ack_wanted_ && resp_seq_ > resp_acked_ && !resp_error_) append_ack(s);
    return s.txq.empty() || flush_tx(s);
}

bool QueuePair::answers_block(const Stream &s, bool modifies) noexcept {
    return s.txq.size() >= kMaxQueuedAnswers || (modifies && s.data_items > 0);
}

bool QueuePair::take_drained(Stream &s) noexcept {
    if (!s.drain_wait || answers_block(s, true)) return false;
    s.drain_wait = false;
    return true;
}

bool QueuePair::absorb_queued_nak() {
    // flush_tx turned a read answer into a NAK (its region was deregistered): the responder
    // enters the error state, as after any NAK. Engine thread: the answer stream's own.
    if (!std::exchange(resp().nak_queued, false)) return false;
    resp_error_ = true;
    std::lock_guard lk(sq_mu_);
    flush_all_locked();
    return true;
}

QueuePair::Step QueuePair::wait_for_answers(bool modifies) {
    Stream &s = resp();
    // The answer queue changes on the engine thread only, which runs this: no lock to look.
    if (!answers_block(s, modifies)) return Step::kContinue;
    if (!answer_now(s)) return Step::kFatal;
    std::lock_guard lk(s.mu);
    if (!answers_block(s, modifies)) return Step::kContinue;
    // Flow control instead of copies: the request stays staged until EPOLLOUT drains the
    // answers (on_events), and meanwhile nothing more is read from this peer.
    s.drain_wait = true;
    if (!s.want_out) {
        s.want_out = true;
        update_mask(s);
    }
    return Step::kStall;
}

QueuePair::Step QueuePair::rx_payload(Stream &s, int &budget) {
    // bytes already staged
    size_t staged = s.tail - s.head;
    if (staged && s.remaining) {
        size_t take = static_cast<size_t>(std::min<uint64_t>(staged, s.remaining));
        if (s.dst && !s.failed) {
            RegionUse use(s.dst_region.get());
            if (use.ok() || !s.dst_region)
                std::memcpy(s.dst, s.buf.get() + s.head, take);
            else
                s.failed = true;
        }
        if (s.dst) s.dst += take;
        s.head += take;
        s.remaining -= take;
    }
    if (s.remaining == 0) {
        payload_done(s);
        return Step::kContinue;
    }
    if (budget-- <= 0) return Step::kBlock;  // nothing staged is left: the socket has the rest
    if (!s.is_request_stream && !answer_now(s)) return Step::kFatal;
    // straight from the socket into the target, with the next header behind it
    s.head = s.tail = 0;
    iovec iov[2];
    size_t want = static_cast<size_t>(std::min<uint64_t>(s.remaining, SIZE_MAX / 2));
    bool discard = !s.dst || s.failed;
    iov[0].iov_base = discard ? g_discard : s.dst;
    iov[0].iov_len = discard ? std::min(want, sizeof(g_discard)) : want;
    iov[1].iov_base = s.buf.get();
    iov[1].iov_len = s.remaining >= kDirectThreshold ? kHeaderSize : kStagingSize;
    ssize_t n;
    {
        RegionUse use(discard ? nullptr : s.dst_region.get());
        if (!discard && s.dst_region && !use.ok()) {
            s.failed = true;
            return Step::kContinue;
        }
        n = ::readv(s.fd.get(), iov, 2);
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Step::kBlock;
    if (n <= 0) {
        if (!s.why)  // the first cause: flush_tx may have shut the socket down
            s.why = n == 0 ? "the peer closed the connection mid-message" : strerror(errno);
        return Step::kFatal;
    }
    size_t got = static_cast<size_t>(n);
    size_t into_dst = std::min(got, iov[0].iov_len);
    if (s.dst) s.dst += into_dst;
    s.remaining -= into_dst;
    s.tail = got - into_dst;
    if (s.remaining == 0) payload_done(s);
    return Step::kContinue;
}

void QueuePair::read_stream(Stream &s) {
    bool responder = !s.is_request_stream;
    int budget = kRxBudget;
    Step st = Step::kContinue;
    while (st == Step::kContinue) {
        if (s.disc_rx) {
            st = Step::kStop;
            break;
        }
        if (s.rx == Rx::kPayload) {
            st = rx_payload(s, budget);
            continue;
        }
        if (s.tail - s.head >= kHeaderSize) {
            FrameHeader h;
            std::memcpy(&h, s.buf.get() + s.head, kHeaderSize);
            st = responder ? responder_header(s, h) : completer_header(s, h);
            if (st == Step::kStall) break;  // header stays staged for the retry
            s.head += kHeaderSize;
            if (st == Step::kContinue && s.payload != Payload::kNone) {
                s.rx = Rx::kPayload;
                if (s.remaining == 0) payload_done(s);
            }
            if (st == Step::kStop) break;
            continue;
        }
        // Yield only with nothing complete staged: what is left is in the socket, so the
        // level-triggered engine comes back for it.
        if (budget-- <= 0) {
            st = Step::kBlock;
            break;
        }
        // Answers never wait across a system call: the peer may be waiting for them.
        if (responder && !answer_now(s)) {
            st = Step::kFatal;
            break;
        }
        if (s.head > 0) {
            std::memmove(s.buf.get(), s.buf.get() + s.head, s.tail - s.head);
            s.tail -= s.head;
            s.head = 0;
        }
        size_t room = kStagingSize - s.tail;
        ssize_t n = ::recv(s.fd.get(), s.buf.get() + s.tail, room, MSG_DONTWAIT);
        if (n > 0) {
            s.tail += static_cast<size_t>(n);
            // A short read drained the socket: after these frames, stop rather than pay for an
            // EAGAIN; the level-triggered poll says when more arrives.
            if (static_cast<size_t>(n) < room) budget = 0;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            st = Step::kBlock;
        } else {
            st = Step::kFatal;
            if (!s.why)
                s.why = n == 0 ? "the peer closed the connection without a disconnect"
                               : strerror(errno);
        }
    }
    if (st == Step::kFatal) {
        if (s.disc_rx) return;
        lost(s.why ? s.why : "protocol error");
        return;
    }
    if (responder && !answer_now(s)) {
        lost(s.why ? s.why : "send failed");
        return;
    }
    bool broken = false, retry = false;
    {
        std::lock_guard lk(s.mu);
        broken = !responder && !flush_tx(s);
        if (broken) {
        } else if (st == Step::kStall) {
            s.stalled = true;
            retry = take_drained(s);  // the answers left since the request chose to wait
            update_mask(s);
        } else if (st == Step::kStop && s.rx_on) {
            s.rx_on = false;  // end of this stream's input
            update_mask(s);
        }
    }
    if (broken) {
        lost(s.why ? s.why : "send failed");  // not under s.mu: lost() takes it
        return;
    }
    if (responder) absorb_queued_nak();
    if (retry) resume_responder();
    if (s.disc_rx) maybe_closed();
}

}  // namespace rpma::tcp
