#include "provider/tcp/domain.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "common/log.h"
#include "provider/soft/compl_channel.h"
#include "provider/soft/cq.h"
#include "provider/soft/recv_queue.h"
#include "provider/tcp/listener.h"
#include "provider/tcp/queue_pair.h"
#include "provider/tcp/wire.h"

namespace rpma::tcp {

namespace {

constexpr prov::Caps kCaps{rc::kMaxOpLength, kConnectPdataMax, kAcceptPdataMax};

// The domain made every CQ and SRQ it is handed back: the casts cannot go wrong.
QpConfig qp_config(const prov::QpAttr &a) {
    QpConfig c;
    c.sq_size = a.sq_size;
    c.rq_size = a.rq_size;
    c.timeout_ms = a.timeout_ms;
    c.cq = static_cast<Cq *>(a.cq);
    c.recv_cq = static_cast<Cq *>(a.recv_cq);
    c.srq = static_cast<RecvQueue *>(a.srq);
    return c;
}

// 0.0.0.0 or ::, which a listener may bind but nothing can be connected to over RDMA.
bool unspecified(const sockaddr_storage &ss) {
    if (ss.ss_family == AF_INET)
        return reinterpret_cast<const sockaddr_in &>(ss).sin_addr.s_addr == htonl(INADDR_ANY);
    if (ss.ss_family == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6 &>(ss).sin6_addr);
    return false;
}

}  // namespace

Domain::~Domain() = default;

const prov::Caps &Domain::caps() const noexcept {
    return kCaps;
}

Engine *Domain::engine() {
    // Checked before mu_: a parent thread may have held it when the process forked.
    if (check_process("the peer's progress engine")) return nullptr;
    std::lock_guard lk(mu_);
    if (!engine_) {
        auto e = std::make_unique<Engine>();
        if (!e->ok()) return nullptr;
        engine_ = std::move(e);
        started_.store(engine_.get(), std::memory_order_release);
    }
    return engine_.get();
}

int Domain::check_process(const char *what) const noexcept {
    Engine *e = started_.load(std::memory_order_acquire);
    return e ? e->check_process(what) : 0;
}

int Domain::register_memory(char *addr, size_t size, int usage,
                            std::shared_ptr<prov::MemoryRegion> *out) {
    *out = mrs_.add(addr, size, usage);
    return 0;
}

void Domain::deregister(const std::shared_ptr<prov::MemoryRegion> &mr) noexcept {
    // Remote accesses that already found the region finish before the memory is given back.
    mrs_.remove(mr->rkey());
    static_cast<Region *>(mr.get())->kill();
}

int Domain::create_channel(std::unique_ptr<prov::CompletionChannel> *out) {
    auto ch = std::make_unique<ComplChannel>();
    if (!ch->valid()) return RPMA_E_PROVIDER;
    *out = std::move(ch);
    return 0;
}

// Beyond 0 the size does not matter here: the queue grows, and rpma_cq_get_wc drains it. A CQ
// of no entries is refused, as ibv_create_cq refuses it.
int Domain::create_cq(prov::CompletionChannel *channel, bool shared, uint32_t size,
                      std::unique_ptr<prov::CompletionQueue> *out) {
    if (size == 0) {
        RPMA_LOG_ERROR("a CQ of 0 entries");
        return RPMA_E_PROVIDER;
    }
    *out = std::make_unique<Cq>(static_cast<ComplChannel *>(channel), shared);
    return 0;
}

int Domain::create_srq(uint32_t size, std::unique_ptr<prov::SharedRecvQueue> *out) {
    if (size == 0) {  // as ibv_create_srq refuses one
        RPMA_LOG_ERROR("an SRQ of 0 receives");
        return RPMA_E_PROVIDER;
    }
    *out = std::make_unique<RecvQueue>(size);
    return 0;
}

// Software transport: prefetching means faulting the pages in ahead of the traffic.
int Domain::advise(const prov::MemoryRegion &, char *start, size_t len, int advice, uint32_t) {
    if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT || len == 0) return 0;  // never faults
    uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    uintptr_t begin = reinterpret_cast<uintptr_t>(start) & ~(page - 1);
    uintptr_t end = reinterpret_cast<uintptr_t>(start) + len;
    if (::madvise(reinterpret_cast<void *>(begin), end - begin, MADV_WILLNEED) != 0) {
        RPMA_LOG_ERROR("madvise: %m");
        return RPMA_E_PROVIDER;
    }
    return 0;
}

int Domain::listen(const char *addr, const char *port, std::shared_ptr<prov::Listener> *out) {
    Engine *e = engine();
    if (!e) return RPMA_E_PROVIDER;
    std::shared_ptr<Listener> l;
    int ret = Listener::create(e, upgrade_, addr, port, &l);
    if (ret == 0) *out = std::move(l);
    return ret;
}

int Domain::create_qp(const char *addr, const char *port, const prov::QpAttr &attr,
                      std::shared_ptr<prov::QueuePair> *out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    int rc = ::getaddrinfo(addr, port, &hints, &res);
    if (rc != 0) {
        RPMA_LOG_ERROR("cannot resolve %s:%s: %s", addr, port, gai_strerror(rc));
        return RPMA_E_PROVIDER;
    }
    sockaddr_storage ss{};
    std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
    socklen_t len = res->ai_addrlen;
    freeaddrinfo(res);
    if (unspecified(ss)) {
        // the kernel would take it for this host; RDMA CM cannot resolve a route to it
        RPMA_LOG_ERROR("cannot connect to %s: an unspecified (wildcard) address", addr);
        return RPMA_E_PROVIDER;
    }
    Engine *e = engine();
    if (!e) return RPMA_E_PROVIDER;
    auto qp = make_qp(e, attr);
    qp->set_remote(ss, len);
    *out = std::move(qp);
    return 0;
}

int Domain::create_qp(const prov::QpAttr &attr, prov::IncomingRequest &,
                      std::shared_ptr<prov::QueuePair> *out) {
    Engine *e = engine();
    if (!e) return RPMA_E_PROVIDER;
    *out = make_qp(e, attr);
    return 0;
}

std::shared_ptr<QueuePair> Domain::make_qp(Engine *e, const prov::QpAttr &attr) {
    QpConfig cfg = qp_config(attr);
    auto qp = QueuePair::create(e, &mrs_, cfg, attr.events, upgrade_);
    // A thread waiting on (or polling) the CQ or the connection's own RCQ reads this queue
    // pair's answers and serves the peer's requests itself instead of waiting for the engine
    // thread; close() takes it back.
    qp->set_cq_hook(true);
    return qp;
}

}  // namespace rpma::tcp
