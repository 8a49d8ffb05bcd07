// The librdmacm entry points the verbs provider calls, replaced at link time (--wrap). An event
// channel is a real eventfd (semaphore mode): one unit per queued event, so a poll(2) on its fd
// (the connection's event fd) wakes exactly when rdma_get_cm_event has something to return.
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "common/fd.h"
#include "fake_internal.h"

using namespace rpma::fake;

namespace {

struct FakeAddrInfo {
    rdma_addrinfo ai;  // first: the provider's pointer is this struct's
    sockaddr_in src;
    sockaddr_in dst;
};

struct FakeEvent {
    rdma_cm_event ev;  // first: the provider's pointer is this struct's
    uint8_t pdata[256];
};

std::mutex g_mu;
std::map<rdma_event_channel *, std::deque<FakeEvent *>> g_queues;
rdma_event_channel *g_last_channel = nullptr;
rdma_cm_id *g_last_id = nullptr;

rdma_cm_id *new_id(rdma_event_channel *ch, rdma_port_space ps) {
    born("cm_id");
    auto *id = new rdma_cm_id{};
    id->channel = ch;
    id->ps = ps;
    return id;
}

void free_event(FakeEvent *e) {
    died("cm_event");
    delete e;
}

}  // namespace

namespace rpma::fake {

void deliver(rdma_event_channel *ch, rdma_cm_id *id, rdma_cm_event_type type,
             const std::vector<uint8_t> &pdata, int status) {
    born("cm_event");
    auto *e = new FakeEvent{};
    e->ev.id = id;
    e->ev.event = type;
    e->ev.status = status;
    if (!pdata.empty()) {
        std::memcpy(e->pdata, pdata.data(), pdata.size());
        e->ev.param.conn.private_data = e->pdata;
        e->ev.param.conn.private_data_len = static_cast<uint8_t>(pdata.size());
    }
    {
        std::lock_guard lk(g_mu);
        g_queues[ch].push_back(e);
    }
    uint64_t one = 1;
    if (::write(ch->fd, &one, sizeof(one)) != sizeof(one)) std::abort();
}

rdma_event_channel *last_event_channel() {
    std::lock_guard lk(g_mu);
    return g_last_channel;
}

rdma_cm_id *last_cm_id() {
    std::lock_guard lk(g_mu);
    return g_last_id;
}

rdma_cm_id *incoming_id() {
    rdma_cm_id *id = new_id(nullptr, RDMA_PS_TCP);
    id->verbs = context();
    return id;
}

}  // namespace rpma::fake

extern "C" {

int __wrap_rdma_getaddrinfo(const char *, const char *, const rdma_addrinfo *hints,
                            rdma_addrinfo **res) {
    if (int err = hit("rdma_getaddrinfo")) {
        errno = err;
        return -1;
    }
    born("addrinfo");
    auto *a = new FakeAddrInfo{};
    a->src.sin_family = a->dst.sin_family = AF_INET;
    a->ai.ai_family = AF_INET;
    a->ai.ai_port_space = hints ? hints->ai_port_space : RDMA_PS_TCP;
    a->ai.ai_flags = hints ? hints->ai_flags : 0;
    a->ai.ai_src_addr = reinterpret_cast<sockaddr *>(&a->src);
    a->ai.ai_dst_addr = reinterpret_cast<sockaddr *>(&a->dst);
    *res = &a->ai;
    return 0;
}

void __wrap_rdma_freeaddrinfo(rdma_addrinfo *res) {
    hit("rdma_freeaddrinfo");
    died("addrinfo");
    delete reinterpret_cast<FakeAddrInfo *>(res);
}

rdma_event_channel *__wrap_rdma_create_event_channel(void) {
    if (int err = hit("rdma_create_event_channel")) {
        errno = err;
        return nullptr;
    }
    born("event_channel");
    auto *ch = new rdma_event_channel{};
    // non-blocking, unlike rdma_cm's: a test that reads an empty channel gets EAGAIN, not a hang
    ch->fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE | EFD_NONBLOCK);
    std::lock_guard lk(g_mu);
    g_queues[ch];
    g_last_channel = ch;
    return ch;
}

void __wrap_rdma_destroy_event_channel(rdma_event_channel *ch) {
    hit("rdma_destroy_event_channel");
    std::deque<FakeEvent *> left;
    {
        std::lock_guard lk(g_mu);
        left.swap(g_queues[ch]);
        g_queues.erase(ch);
        if (g_last_channel == ch) g_last_channel = nullptr;
    }
    for (FakeEvent *e : left) free_event(e);
    ::close(ch->fd);
    died("event_channel");
    delete ch;
}

int __wrap_rdma_get_cm_event(rdma_event_channel *ch, rdma_cm_event **event) {
    // librdmacm may read again inside the call (an event it drops): only a non-blocking read
    // cannot then sleep, so that is counted apart
    if (rpma::nonblocking(ch->fd)) hit("rdma_get_cm_event, non-blocking");
    if (int err = hit("rdma_get_cm_event")) {
        errno = err;
        return -1;
    }
    FakeEvent *e = nullptr;
    {
        std::lock_guard lk(g_mu);
        auto &q = g_queues[ch];
        if (!q.empty()) {
            e = q.front();
            q.pop_front();
        }
    }
    if (!e) {
        errno = EAGAIN;  // the fakes never block (the fd is non-blocking)
        return -1;
    }
    uint64_t unit;
    if (::read(ch->fd, &unit, sizeof(unit)) != sizeof(unit)) std::abort();
    *event = &e->ev;
    return 0;
}

int __wrap_rdma_ack_cm_event(rdma_cm_event *event) {
    int err = hit("rdma_ack_cm_event");
    free_event(reinterpret_cast<FakeEvent *>(event));  // a failed ack must not leak the fake's
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

int __wrap_rdma_create_id(rdma_event_channel *ch, rdma_cm_id **id, void *context,
                          rdma_port_space ps) {
    if (int err = hit("rdma_create_id")) {
        errno = err;
        return -1;
    }
    *id = new_id(ch, ps);
    (*id)->context = context;
    std::lock_guard lk(g_mu);
    g_last_id = *id;
    return 0;
}

int __wrap_rdma_destroy_id(rdma_cm_id *id) {
    int err = hit("rdma_destroy_id");
    // rdma_cm does not destroy an id's QP: one left there stays counted as alive (a leak).
    if (id->qp) {
        delete id->qp;
        id->qp = nullptr;
    }
    died("cm_id");
    {
        std::lock_guard lk(g_mu);
        if (g_last_id == id) g_last_id = nullptr;
    }
    delete id;
    if (err) errno = err;
    return err ? -1 : 0;
}

static int plain(const char *fn) {
    if (int err = hit(fn)) {
        errno = err;
        return -1;
    }
    return 0;
}

int __wrap_rdma_bind_addr(rdma_cm_id *id, sockaddr *) {
    if (plain("rdma_bind_addr")) return -1;
    if (!bind_no_device()) id->verbs = context();
    return 0;
}

int __wrap_rdma_resolve_addr(rdma_cm_id *id, sockaddr *, sockaddr *, int) {
    if (plain("rdma_resolve_addr")) return -1;
    if (!bind_no_device()) id->verbs = context();
    return 0;
}

int __wrap_rdma_resolve_route(rdma_cm_id *, int) {
    return plain("rdma_resolve_route");
}

int __wrap_rdma_listen(rdma_cm_id *, int) {
    return plain("rdma_listen");
}

int __wrap_rdma_connect(rdma_cm_id *, rdma_conn_param *) {
    return plain("rdma_connect");
}

int __wrap_rdma_accept(rdma_cm_id *, rdma_conn_param *) {
    return plain("rdma_accept");
}

int __wrap_rdma_reject(rdma_cm_id *, const void *, uint8_t) {
    return plain("rdma_reject");
}

int __wrap_rdma_disconnect(rdma_cm_id *) {
    return plain("rdma_disconnect");
}

int __wrap_rdma_migrate_id(rdma_cm_id *id, rdma_event_channel *ch) {
    if (plain("rdma_migrate_id")) return -1;
    id->channel = ch;
    return 0;
}

int __wrap_rdma_create_qp_ex(rdma_cm_id *id, ibv_qp_init_attr_ex *attr) {
    seen().qp_attr = *attr;
    if (plain("rdma_create_qp_ex")) return -1;
    born("qp");
    auto *qp = new ibv_qp{};
    qp->context = id->verbs ? id->verbs : context();
    qp->pd = attr->pd;
    qp->send_cq = attr->send_cq;
    qp->recv_cq = attr->recv_cq;
    qp->srq = attr->srq;
    qp->qp_num = 0x42;
    qp->qp_type = attr->qp_type;
    id->qp = qp;
    return 0;
}

void __wrap_rdma_destroy_qp(rdma_cm_id *id) {
    hit("rdma_destroy_qp");
    died("qp");
    delete id->qp;
    id->qp = nullptr;
}

}  // extern "C"
