#include "provider/shm/link.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rpma::shm {

namespace {

std::string errno_text(const char *what) {
    return std::string(what) + ": " + strerror(errno);
}

sockaddr_un unix_address(uint16_t port, socklen_t *len) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::string name = socket_name(port);  // abstract: starts with a NUL
    std::memcpy(a.sun_path, name.data(), name.size());
    *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    return a;
}

// The address a tcp socket has at `side` (getsockname or getpeername), as bytes and a port.
bool endpoint(int fd, bool peer, std::string *ip, uint16_t *port) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr *>(&ss), &len)
                 : ::getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len);
    if (r != 0) return false;
    if (ss.ss_family == AF_INET) {
        auto *in = reinterpret_cast<sockaddr_in *>(&ss);
        ip->assign(reinterpret_cast<char *>(&in->sin_addr), sizeof(in->sin_addr));
        *port = ntohs(in->sin_port);
        return true;
    }
    if (ss.ss_family == AF_INET6) {
        auto *in = reinterpret_cast<sockaddr_in6 *>(&ss);
        ip->assign(reinterpret_cast<char *>(&in->sin6_addr), sizeof(in->sin6_addr));
        *port = ntohs(in->sin6_port);
        return true;
    }
    return false;
}

// A tcp connection whose two ends have one address runs inside one host (and one network
// namespace): the kernel picks the destination's own address as the source of a local route.
bool same_host(int tcp_fd, uint16_t *peer_port, std::string *why) {
    std::string mine, theirs;
    uint16_t my_port;
    if (!endpoint(tcp_fd, false, &mine, &my_port) || !endpoint(tcp_fd, true, &theirs, peer_port)) {
        *why = "the connection's addresses are unknown";
        return false;
    }
    if (mine != theirs) {
        *why = "the peer is on another host";
        return false;
    }
    return true;
}

bool is_eventfd(int fd) {
    char path[64], target[64];
    std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = ::readlink(path, target, sizeof(target) - 1);
    if (n <= 0) return false;
    target[n] = 0;
    return std::strcmp(target, "anon_inode:[eventfd]") == 0;
}

}  // namespace

std::string socket_name(uint16_t port) {
    char buf[40];
    int n = std::snprintf(buf, sizeof(buf), "%crpma-shm:%u", '\0', static_cast<unsigned>(port));
    return std::string(buf, static_cast<size_t>(n));
}

bool peer_allowed(int unix_fd, std::string *why) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(unix_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        *why = errno_text("SO_PEERCRED");
        return false;
    }
    if (cred.uid != ::geteuid()) {
        *why = "the peer runs as another user";
        return false;
    }
    if (cred.pid == 0) {
        *why = "the peer is in another PID namespace";
        return false;
    }
    return true;
}

namespace {
// One offer on the control socket: the Offer and room for its descriptors (SCM_RIGHTS), the
// same both ways.
struct OfferMessage {
    explicit OfferMessage(Offer *o) : iov{o, sizeof(*o)} {
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf;
        msg.msg_controllen = sizeof(cbuf);
    }
    OfferMessage(const OfferMessage &) = delete;
    OfferMessage &operator=(const OfferMessage &) = delete;

    iovec iov;
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kNumFds)] = {};
    msghdr msg{};
};
}  // namespace

std::shared_ptr<Link> Link::offer(int tcp_fd, uint64_t token, std::string *why) {
    uint16_t port = 0;
    if (!same_host(tcp_fd, &port, why)) return nullptr;
    std::shared_ptr<Link> l(new Link);
    l->client_ = true;
    l->token_ = token;
    if (!l->seg_.create(kDefaultRingSize, why)) return nullptr;
    for (int i = kClientMain; i < kNumFds; ++i) {
        l->fds_[i].reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
        if (!l->fds_[i].valid()) {
            *why = errno_text("eventfd");
            return nullptr;
        }
    }
    l->ctl_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!l->ctl_.valid()) {
        *why = errno_text("socket(AF_UNIX)");
        return nullptr;
    }
    socklen_t alen;
    sockaddr_un addr = unix_address(port, &alen);
    if (::connect(l->ctl_.get(), reinterpret_cast<sockaddr *>(&addr), alen) != 0) {
        *why = errno == ECONNREFUSED || errno == ENOENT
                   ? "the server takes no shared-memory offers"
                   : errno_text("connecting to the server's unix socket");
        return nullptr;
    }
    if (!peer_allowed(l->ctl_.get(), why)) return nullptr;
    Offer o{kOfferMagic, kOfferVersion, kNumFds, token, kDefaultRingSize, 0};
    OfferMessage m(&o);
    msghdr &msg = m.msg;
    cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * kNumFds);
    int fds[kNumFds] = {l->seg_.fd()};
    for (int i = kClientMain; i < kNumFds; ++i) fds[i] = l->fds_[i].get();
    std::memcpy(CMSG_DATA(cm), fds, sizeof(fds));
    if (::sendmsg(l->ctl_.get(), &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(o))) {
        *why = errno_text("sending the offer");
        return nullptr;
    }
    l->seg_.close_fd();  // the server has its own now (SCM_RIGHTS)
    return l;
}

int Link::read_offer(int ctl, Offer *o, Fd *fds, int *nfds, std::string *why) {
    OfferMessage m(o);
    msghdr &msg = m.msg;
    ssize_t n = ::recvmsg(ctl, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    *nfds = 0;
    // whatever descriptors came are ours to close, even in a bad message
    for (cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (*nfds < kNumFds)
                fds[(*nfds)++].reset(fd);
            else
                ::close(fd);
        }
    }
    if (n != static_cast<ssize_t>(sizeof(*o)) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        *why = n <= 0 ? "the offer's socket closed" : "a malformed offer";
        return -1;
    }
    return 1;
}

std::shared_ptr<Link> Link::accept_offer(Fd ctl, const Offer &o, Fd *fds, int nfds,
                                         std::string *why) {
    std::shared_ptr<Link> l(new Link);
    l->ctl_ = std::move(ctl);
    if (o.magic != kOfferMagic || o.version != kOfferVersion || o.nfds != kNumFds ||
        nfds != kNumFds) {
        *why = "a malformed offer";
        return nullptr;
    }
    if (!peer_allowed(l->ctl_.get(), why)) return nullptr;
    for (int i = kClientMain; i < kNumFds; ++i) {
        if (!is_eventfd(fds[i].get())) {
            *why = "a doorbell in the offer is not an eventfd";
            return nullptr;
        }
        // the ring must never block a thread; the flag is the peer's too, which is harmless
        set_nonblocking(fds[i].get(), true);
        l->fds_[i] = std::move(fds[i]);
    }
    l->token_ = o.token;
    if (!l->seg_.attach(std::move(fds[kMemfd]), o.ring_size, why)) return nullptr;
    return l;
}

Fd Link::take_wake(bool main) noexcept {
    int i = client_ ? (main ? kClientMain : kClientJoin) : (main ? kServerMain : kServerJoin);
    return std::move(fds_[i]);
}

std::unique_ptr<rc::ByteStream> Link::stream(bool main, int wake_fd) {
    RingId to_server = main ? RingId::kMainToServer : RingId::kJoinToServer;
    RingId to_client = main ? RingId::kMainToClient : RingId::kJoinToClient;
    int peer = client_ ? (main ? kServerMain : kServerJoin) : (main ? kClientMain : kClientJoin);
    auto s = std::make_unique<ShmStream>(seg_.ring(client_ ? to_server : to_client),
                                         seg_.ring(client_ ? to_client : to_server), wake_fd,
                                         fds_[peer].get());
    s->keep(shared_from_this());
    streams_[main ? 0 : 1] = s.get();
    return s;
}

void Link::peer_gone() noexcept {
    for (ShmStream *s : streams_)
        if (s) s->peer_gone();
}

}  // namespace rpma::shm
