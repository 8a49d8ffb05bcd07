#include "provider/tcp/connector.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "common/log.h"
#include "provider/provider.h"
#include "provider/tcp/socket_stream.h"

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

// Only for the handshake: a fresh socket's buffer always takes a few hundred bytes.
bool write_all_small(rc::ByteStream &io, const void *p, size_t n) {
    iovec v{const_cast<void *>(p), n};
    return io.writev(&v, 1) == static_cast<ssize_t>(n);
}

Connector::Step fail(rpma_conn_event ev) {
    return {Connector::Step::kFail, ev};
}

}  // namespace

void Connector::set_socket_options(int fd) {
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

void Connector::reject(Fd &main) {
    Reply rep{};
    rep.magic = kMagic;
    rep.kind = static_cast<uint8_t>(ReplyKind::kReject);
    SocketStream io(&main);
    write_all_small(io, &rep, sizeof(rep));
}

Clock::time_point Connector::start(const void *pdata, uint8_t pdata_len, int timeout_ms) {
    token_ = random_token();
    if (pdata_len)
        local_pdata_.assign(static_cast<const uint8_t *>(pdata),
                            static_cast<const uint8_t *>(pdata) + pdata_len);
    return Clock::now() + std::chrono::milliseconds(timeout_ms);
}

Connector::Step Connector::open(Fd *fd) {
    fd->reset(::socket(remote_addr_.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd->valid()) {
        RPMA_LOG_ERROR("socket: %m");
        return {Step::kError};
    }
    set_socket_options(fd->get());
    // Our ephemeral port then lingers in TIME_WAIT without blocking a later listen on it.
    int one = 1;
    ::setsockopt(fd->get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int r =
        ::connect(fd->get(), reinterpret_cast<const sockaddr *>(&remote_addr_), remote_addr_len_);
    if (r != 0 && errno != EINPROGRESS) {
        RPMA_LOG_NOTICE("connect: %m");
        return fail(errno == ECONNREFUSED ? RPMA_CONN_REJECTED : RPMA_CONN_UNREACHABLE);
    }
    return {};
}

Connector::Step Connector::send_hello(int fd, rc::ByteStream &io, bool main, uint32_t qp_num) {
    int err = 0;
    socklen_t el = sizeof(err);
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
    if (err == EINPROGRESS || err == EALREADY) return {Step::kWait};
    if (err != 0) {
        RPMA_LOG_NOTICE("connect: %s", strerror(err));
        return fail(err == ECONNREFUSED ? RPMA_CONN_REJECTED : RPMA_CONN_UNREACHABLE);
    }
    Hello h{};
    h.magic = kMagic;
    h.version = kProtocolVersion;
    h.role = static_cast<uint8_t>(main ? StreamRole::kMain : StreamRole::kJoin);
    h.token = token_;
    h.qp_num = qp_num;
    if (main) {
        h.pdata_len = static_cast<uint8_t>(local_pdata_.size());
        if (!local_pdata_.empty()) std::memcpy(h.pdata, local_pdata_.data(), local_pdata_.size());
        if (!make_offer(fd, h)) return fail(RPMA_CONN_UNREACHABLE);
    }
    if (!write_all_small(io, &h, sizeof(h))) {
        RPMA_LOG_NOTICE("sending the connection request failed: %m");
        return fail(RPMA_CONN_UNREACHABLE);
    }
    return {};
}

Clock::time_point Connector::reply_deadline() {
    return Clock::now() + kReplyTimeout;
}

Connector::Step Connector::read_reply(rc::ByteStream &io, uint32_t *remote_qp,
                                      std::vector<uint8_t> *pdata) {
    char *p = reinterpret_cast<char *>(&reply_) + reply_got_;
    iovec into{p, sizeof(reply_) - reply_got_};
    ssize_t r = io.readv(&into, 1);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return {Step::kWait};
    if (r <= 0) {
        RPMA_LOG_NOTICE("the server closed the connection before answering");
        return fail(RPMA_CONN_REJECTED);
    }
    reply_got_ += static_cast<size_t>(r);
    if (reply_got_ < sizeof(reply_)) return {Step::kWait};
    if (reply_.magic != kMagic || reply_.pdata_len > kAcceptPdataMax ||
        (reply_.kind != static_cast<uint8_t>(ReplyKind::kAccept) &&
         reply_.kind != static_cast<uint8_t>(ReplyKind::kReject))) {
        RPMA_LOG_ERROR("malformed answer to the connection request");
        return fail(RPMA_CONN_LOST);
    }
    if (reply_.kind == static_cast<uint8_t>(ReplyKind::kReject)) return fail(RPMA_CONN_REJECTED);
    *remote_qp = reply_.qp_num;
    *pdata = delivered_pdata(reply_.pdata, reply_.pdata_len);
    if (!settle_offer()) return fail(RPMA_CONN_REJECTED);
    return {};
}

bool Connector::send_accept(Fd *main, uint32_t qp_num, const void *pdata, uint8_t pdata_len) {
    Reply rep{};
    rep.magic = kMagic;
    rep.kind = static_cast<uint8_t>(ReplyKind::kAccept);
    rep.pdata_len = pdata_len;
    rep.flags = link_ ? kReplyShm : 0;
    rep.qp_num = qp_num;
    if (pdata_len) std::memcpy(rep.pdata, pdata, pdata_len);
    // Nothing else is written on the main stream before the client has this answer.
    SocketStream tcp(main);
    return write_all_small(tcp, &rep, sizeof(rep));
}

bool Connector::make_offer(int main_fd, Hello &h) {
    prov::Choice choice = prov::provider_choice();
    if (choice == prov::Choice::kTcp) return true;
    std::string why = "this build has no way off tcp";
    if (upgrade_) link_ = upgrade_->offer(main_fd, token_, &why);
    if (link_) {
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

void Connector::end_offer() noexcept {
    if (link_) ::shutdown(link_->ctl_fd(), SHUT_RDWR);  // not closed: the link owns the fd
}

bool Connector::settle_offer() {
    if (!link_ || (reply_.flags & kReplyShm)) return true;
    link_.reset();
    if (prov::provider_choice() == prov::Choice::kShm) {
        RPMA_LOG_ERROR("RPMA_PROVIDER=shm: the server keeps this connection on tcp");
        return false;
    }
    RPMA_LOG_INFO("the connection stays on tcp: the server did not take the offer");
    return true;
}

}  // namespace rpma::tcp
