#include "provider/shm/offer_desk.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace rpma::shm {

namespace {
constexpr auto kOfferTimeout = std::chrono::seconds(5);  // as long as a tcp Hello may take
constexpr size_t kMaxHeld = 1024;  // bounds what offers that never pair can make us hold
}  // namespace

std::shared_ptr<OfferDesk> OfferDesk::open(Engine *engine, uint16_t port) {
    std::shared_ptr<OfferDesk> d(new OfferDesk(engine));
    d->lfd_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::string name = socket_name(port);
    std::memcpy(a.sun_path, name.data(), name.size());
    auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    if (!d->lfd_.valid() || ::bind(d->lfd_.get(), reinterpret_cast<sockaddr *>(&a), len) != 0 ||
        ::listen(d->lfd_.get(), SOMAXCONN) != 0) {
        RPMA_LOG_INFO("port %u: connections stay on tcp (no unix socket for shared memory: %m)",
                      static_cast<unsigned>(port));
        return nullptr;
    }
    d->lkey_ = engine->reserve_key();
    d->backoff_.watch(d->lfd_.get(), d->lkey_, d);
    if (!engine->add(d->lfd_.get(), EPOLLIN, d, d->lkey_)) return nullptr;
    return d;
}

OfferDesk::~OfferDesk() = default;

void OfferDesk::close() {
    if (lkey_) engine_->remove(std::exchange(lkey_, 0));
    backoff_.stop();
    for (auto &[fd, c] : conns_) engine_->remove(c.key);
    conns_.clear();
    offers_.clear();
    lfd_.reset();
}

void OfferDesk::on_events(int fd, uint32_t) {
    if (fd == lfd_.get())
        accept_all();
    else
        read(fd);
}

void OfferDesk::accept_all() {
    for (;;) {
        Fd s = backoff_.accept();
        if (!s.valid()) return;  // none waits, or out of descriptors: paused (take() tries)
        if (conns_.size() + offers_.size() >= kMaxHeld) {
            RPMA_LOG_WARNING("too many shared-memory offers waiting; refusing one");
            continue;
        }
        int fd = s.get();
        Conn c{std::move(s), 0, Clock::now() + kOfferTimeout};
        auto it = conns_.emplace(fd, std::move(c)).first;
        it->second.key = engine_->add(fd, EPOLLIN, shared_from_this());
        engine_->add_timer(it->second.deadline, weak_from_this());
        read(fd);  // the offer is usually queued already
    }
}

void OfferDesk::drop(int fd) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) return;
    engine_->remove(it->second.key);
    conns_.erase(it);
}

void OfferDesk::read(int fd) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) return;
    Offer o{};
    Fd fds[kNumFds];
    int nfds = 0;
    std::string why;
    int r = Link::read_offer(fd, &o, fds, &nfds, &why);
    if (r == 0) return;
    if (r < 0) {
        RPMA_LOG_INFO("a shared-memory offer was dropped: %s", why.c_str());
        drop(fd);
        return;
    }
    engine_->remove(it->second.key);  // from now on the connection watches it
    Fd ctl = std::move(it->second.fd);
    conns_.erase(it);
    if (offers_.count(o.token)) return;  // a second offer for one token: the first stands
    auto link = Link::accept_offer(std::move(ctl), o, fds, nfds, &why);
    offers_[o.token] = Held{std::move(link), why, Clock::now() + kOfferTimeout};
    engine_->add_timer(offers_[o.token].deadline, weak_from_this());
}

std::shared_ptr<tcp::UpgradeLink> OfferDesk::take(uint64_t token, std::string *why) {
    accept_all();
    std::vector<int> fds;
    for (auto &[fd, c] : conns_) fds.push_back(fd);
    for (int fd : fds) read(fd);
    auto it = offers_.find(token);
    if (it == offers_.end()) {
        *why = "its shared-memory offer did not reach this server";
        return nullptr;
    }
    auto link = std::move(it->second.link);
    if (!link) *why = it->second.why;
    offers_.erase(it);
    return link;
}

void OfferDesk::on_timer() {
    backoff_.on_timer();
    auto now = Clock::now();
    std::vector<int> late;
    for (auto &[fd, c] : conns_)
        if (c.deadline <= now) late.push_back(fd);
    for (int fd : late) drop(fd);
    for (auto it = offers_.begin(); it != offers_.end();)
        it = it->second.deadline <= now ? offers_.erase(it) : std::next(it);
}

}  // namespace rpma::shm
