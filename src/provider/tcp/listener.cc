#include "provider/tcp/listener.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/cancel.h"
#include "common/log.h"
#include "provider/tcp/connector.h"

namespace rpma::tcp {

namespace {
constexpr auto kHelloTimeout = std::chrono::seconds(5);
constexpr size_t kMaxPending = 4096;  // bounds what half-open peers can make us hold

// The offer desk for the tcp socket `fd`, bound (not yet listening); nullptr where offers are
// not taken.
std::shared_ptr<UpgradeDesk> open_desk(Engine *engine, StreamUpgrade *upgrade, int fd) {
    if (!upgrade || prov::provider_choice() == prov::Choice::kTcp) return nullptr;
    sockaddr_storage bound{};
    socklen_t blen = sizeof(bound);
    if (::getsockname(fd, reinterpret_cast<sockaddr *>(&bound), &blen) != 0) return nullptr;
    uint16_t port =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6 *>(&bound)->sin6_port
                                          : reinterpret_cast<sockaddr_in *>(&bound)->sin_port);
    return upgrade->open_desk(engine, port);
}
}  // namespace

int Listener::create(Engine *engine, StreamUpgrade *upgrade, const char *addr, const char *port,
                     std::shared_ptr<Listener> *out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo *res = nullptr;
    int rc = ::getaddrinfo(addr, port, &hints, &res);
    if (rc != 0) {
        RPMA_LOG_ERROR("cannot resolve %s:%s: %s", addr, port, gai_strerror(rc));
        return RPMA_E_PROVIDER;
    }
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
    std::shared_ptr<Listener> l(new Listener(engine));
    int err = 0;
    for (addrinfo *ai = res; ai && l->requests_.valid(); ai = ai->ai_next) {
        Fd fd(::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!fd.valid()) {
            err = errno;
            continue;
        }
        int one = 1;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
            err = errno;
            continue;
        }
        // The offer socket before listen(): a client on this host may connect the moment the
        // tcp socket listens, and it offers shared memory before it says Hello.
        auto desk = open_desk(engine, upgrade, fd.get());
        if (::listen(fd.get(), SOMAXCONN) != 0) {
            err = errno;
            if (desk) engine->run_sync([&] { desk->close(); });
            continue;
        }
        l->lfd_ = std::move(fd);
        l->desk_ = std::move(desk);
        break;
    }
    if (!l->lfd_.valid()) {
        RPMA_LOG_ERROR("cannot listen on %s:%s: %s", addr, port, strerror(err));
        return RPMA_E_PROVIDER;
    }
    // all set before the first event: the engine thread reads desk_ and the back-off from then on
    l->lkey_ = engine->reserve_key();
    l->backoff_.watch(l->lfd_.get(), l->lkey_, l);
    if (!engine->add(l->lfd_.get(), EPOLLIN, l, l->lkey_)) {
        if (l->desk_) engine->run_sync([&] { l->desk_->close(); });
        return RPMA_E_PROVIDER;
    }
    *out = std::move(l);
    return 0;
}

Listener::~Listener() = default;

Incoming::~Incoming() {
    if (conn.main.valid()) Connector::reject(conn.main);
}

bool IncomingConn::client_gone() const {
    for (const Fd *f : {&main, &join}) {
        pollfd p{f->get(), POLLRDHUP, 0};
        if (f->valid() && ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
            return true;
    }
    return false;
}

std::unique_ptr<prov::IncomingRequest> Listener::next() {
    // As RDMA CM hands out no request whose client has gone: without another request ready the
    // call finds none (RPMA_E_NO_EVENT), where the reference fails (docs/testing.md).
    auto in = requests_.pop();  // the wait, cancellable as the caller has it (common/cancel.h)
    CancelOff off;
    while (in && in->client_gone()) {
        RPMA_LOG_INFO("a connection request whose client has gone is dropped");
        in = requests_.try_pop();
    }
    if (!in) return nullptr;
    return std::make_unique<Incoming>(std::move(*in));
}

void Listener::close() {
    engine_->run_sync([this] {
        if (lkey_) engine_->remove(std::exchange(lkey_, 0));
        backoff_.stop();
        for (auto &[fd, p] : pending_) engine_->remove(p.key);
        pending_.clear();
        halves_.clear();
        if (desk_) desk_->close();
    });
    lfd_.reset();
    for (auto &req : requests_.drain()) Connector::reject(req.main);
}

void Listener::on_events(int fd, uint32_t) {
    if (fd == lfd_.get()) {
        accept_all();
        return;
    }
    auto it = pending_.find(fd);
    if (it != pending_.end()) read_hello(it->second);
}

void Listener::accept_all() {
    for (;;) {
        Fd s = backoff_.accept();
        if (!s.valid()) return;
        if (pending_.size() + halves_.size() >= kMaxPending) {
            RPMA_LOG_WARNING("too many half-open connection requests; refusing one");
            continue;
        }
        int fd = s.get();
        Pending p;
        p.fd = std::move(s);
        p.deadline = Clock::now() + kHelloTimeout;
        auto [it, ok] = pending_.emplace(fd, std::move(p));
        it->second.key = engine_->add(fd, EPOLLIN, shared_from_this());
        engine_->add_timer(it->second.deadline, weak_from_this());
    }
}

void Listener::drop(int fd) {
    auto it = pending_.find(fd);
    if (it == pending_.end()) return;
    engine_->remove(it->second.key);
    pending_.erase(it);
}

void Listener::read_hello(Pending &p) {
    int fd = p.fd.get();
    HelloReader::Step st = p.reader.read(fd);
    if (st == HelloReader::Step::kMore) return;
    if (st == HelloReader::Step::kBad) {
        drop(fd);
        return;
    }
    const Hello &h = p.reader.hello();
    bool main = p.reader.main();
    bool fresh = !halves_.count(h.token);
    Half &half = halves_[h.token];
    Fd &slot = main ? half.main : half.join;
    if (slot.valid()) {
        RPMA_LOG_WARNING("duplicate stream for one connection request; closing it");
        drop(fd);
        return;
    }
    engine_->remove(p.key);
    slot = std::move(p.fd);
    if (main) {
        half.qp_num = h.qp_num;
        half.pdata = delivered_pdata(h.pdata, h.pdata_len);
        half.offered = h.flags & kHelloShmOffer;
    }
    if (fresh) {
        // the other stream has as long to arrive as a Hello has: then the half is dropped
        half.deadline = Clock::now() + kHelloTimeout;
        engine_->add_timer(half.deadline, weak_from_this());
    }
    uint64_t token = h.token;
    pending_.erase(fd);
    if (half.main.valid() && half.join.valid()) complete(token, half);
}

void Listener::complete(uint64_t token, Half &half) {
    IncomingConn in{std::move(half.main), std::move(half.join), half.qp_num, std::move(half.pdata),
                    nullptr};
    bool offered = half.offered;
    halves_.erase(token);
    {
        // scoped: once the request is queued, an application thread may fork, and a heap string
        // this thread still held would be lost to the child (LeakSanitizer reports it)
        std::string why = "the client made no shared-memory offer";
        if (offered && !desk_) why = "this endpoint takes no shared-memory offers";
        if (offered && desk_) in.upgrade = desk_->take(token, &why);
        if (!in.upgrade && prov::provider_choice() == prov::Choice::kShm) {
            RPMA_LOG_ERROR(
                "RPMA_PROVIDER=shm: refusing a connection request that cannot use "
                "shared memory (%s)",
                why.c_str());
            Connector::reject(in.main);
            return;
        }
        if (!in.upgrade && offered) RPMA_LOG_INFO("a connection stays on tcp: %s", why.c_str());
    }
    requests_.push(std::move(in));
}

void Listener::on_timer() {
    backoff_.on_timer();
    auto now = Clock::now();
    std::vector<int> late;
    for (auto &[fd, p] : pending_)
        if (p.deadline <= now) late.push_back(fd);
    for (int fd : late) drop(fd);
    for (auto it = halves_.begin(); it != halves_.end();)
        it = it->second.deadline <= now ? halves_.erase(it) : std::next(it);
}

}  // namespace rpma::tcp
