// The queue pair's construction and the helpers its parts share (qp_internal.h). The parts:
// qp_connect.cc, qp_close.cc (connection management), requester.cc, qp_transmit.cc (frames
// out), qp_receive.cc (frames in), responder.cc, completer.cc.
#include "provider/tcp/queue_pair.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <random>

#include "provider/tcp/qp_internal.h"

namespace rpma::tcp {

namespace {

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

}  // namespace

char g_discard[kDiscardSize];
const char g_zero[kZeroSize] = {};

uint64_t random_token() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    return rng();
}

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

}  // namespace rpma::tcp
