// The fakes' bookkeeping (scripts, call counts, objects alive) and the fake device whose
// context ops stand in for rdma-core's inline calls.
#include "fake.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "../support/cancel_state.h"

namespace rpma::fake {

namespace {

std::mutex g_mu;  // a test may call fakes from several threads
std::map<std::string, int> g_calls;
std::map<std::string, int> g_cancellable;             // calls made with cancellation on
std::map<std::string, std::map<int, int>> g_scripts;  // fn -> call number -> error
std::map<std::string, int> g_alive;
std::deque<ibv_wc> g_wcs;
std::deque<ibv_cq *> g_fired;
unsigned g_acked = 0;
DeviceAttr g_attr;
bool g_stack_present = false;
bool g_bind_no_device = false;
Seen g_seen;

int query_device_ex(ibv_context *, const ibv_query_device_ex_input *, ibv_device_attr_ex *attr,
                    size_t) {
    if (int err = hit("ibv_query_device_ex")) return err;
    std::memset(attr, 0, sizeof(*attr));
    attr->odp_caps.general_caps = g_attr.odp_general;
    attr->odp_caps.per_transport_caps.rc_odp_caps = g_attr.rc_odp;
    return 0;
}

int query_port(ibv_context *, uint8_t, ibv_port_attr *attr, size_t) {
    if (int err = hit("ibv_query_port")) return err;
    std::memset(attr, 0, sizeof(*attr));
    attr->max_msg_sz = g_attr.max_msg_sz;
    return 0;
}

int advise_mr(ibv_pd *, ibv_advise_mr_advice advice, uint32_t, ibv_sge *, uint32_t) {
    g_seen.advise = advice;
    return hit("ibv_advise_mr");
}

int poll_cq(ibv_cq *, int n, ibv_wc *wc) {
    if (int err = hit("ibv_poll_cq")) return -err;
    std::lock_guard lk(g_mu);
    int got = 0;
    while (got < n && !g_wcs.empty()) {
        wc[got++] = g_wcs.front();
        g_wcs.pop_front();
    }
    return got;
}

int req_notify_cq(ibv_cq *, int) {
    return hit("ibv_req_notify_cq");
}

int post_send(ibv_qp *, ibv_send_wr *wr, ibv_send_wr **bad) {
    g_seen.send_wr = *wr;
    g_seen.send_sge = wr->num_sge ? wr->sg_list[0] : ibv_sge{};
    if (int err = hit("ibv_post_send")) {
        *bad = wr;
        return err;
    }
    return 0;
}

int post_recv(ibv_qp *, ibv_recv_wr *wr, ibv_recv_wr **bad) {
    g_seen.recv_wr = *wr;
    g_seen.recv_sge = wr->num_sge ? wr->sg_list[0] : ibv_sge{};
    if (int err = hit("ibv_post_recv")) {
        *bad = wr;
        return err;
    }
    return 0;
}

int post_srq_recv(ibv_srq *, ibv_recv_wr *wr, ibv_recv_wr **bad) {
    g_seen.recv_wr = *wr;
    g_seen.recv_sge = wr->num_sge ? wr->sg_list[0] : ibv_sge{};
    if (int err = hit("ibv_post_srq_recv")) {
        *bad = wr;
        return err;
    }
    return 0;
}

struct FakeDevice {
    ibv_device dev{};
    verbs_context vctx{};
    FakeDevice() {
        std::strcpy(dev.name, "fake_rdma0");
        dev.transport_type = IBV_TRANSPORT_IB;
        vctx.sz = sizeof(verbs_context);
        vctx.query_device_ex = query_device_ex;
        vctx.query_port = query_port;
        vctx.advise_mr = advise_mr;
        ibv_context &c = vctx.context;
        c.device = &dev;
        c.abi_compat = __VERBS_ABI_IS_EXTENDED;
        c.ops.poll_cq = poll_cq;
        c.ops.req_notify_cq = req_notify_cq;
        c.ops.post_send = post_send;
        c.ops.post_recv = post_recv;
        c.ops.post_srq_recv = post_srq_recv;
    }
};

}  // namespace

void reset() {
    std::lock_guard lk(g_mu);
    g_calls.clear();
    g_cancellable.clear();
    g_scripts.clear();
    g_wcs.clear();
    g_fired.clear();
    g_acked = 0;
    g_attr = DeviceAttr{};
    g_stack_present = false;
    g_bind_no_device = false;
    g_seen = Seen{};
}

void fail(const char *fn, int err, int nth) {
    std::lock_guard lk(g_mu);
    g_scripts[fn][g_calls[fn] + nth] = err;
}

int calls(const char *fn) {
    std::lock_guard lk(g_mu);
    auto it = g_calls.find(fn);
    return it == g_calls.end() ? 0 : it->second;
}

int cancellable_calls(const char *fn) {
    std::lock_guard lk(g_mu);
    auto it = g_cancellable.find(fn);
    return it == g_cancellable.end() ? 0 : it->second;
}

int hit(const char *fn) {
    bool cancellable = test::cancellation_on();
    std::lock_guard lk(g_mu);
    if (cancellable) ++g_cancellable[fn];
    int n = ++g_calls[fn];
    auto s = g_scripts.find(fn);
    if (s == g_scripts.end()) return 0;
    auto it = s->second.find(n);
    if (it == s->second.end()) return 0;
    int err = it->second;
    s->second.erase(it);
    return err;
}

void born(const char *kind) {
    std::lock_guard lk(g_mu);
    ++g_alive[kind];
}

void died(const char *kind) {
    std::lock_guard lk(g_mu);
    --g_alive[kind];
}

std::string alive() {
    std::lock_guard lk(g_mu);
    std::string out;
    for (auto &[kind, n] : g_alive)
        if (n) out += (out.empty() ? "" : " ") + kind + "=" + std::to_string(n);
    return out;
}

ibv_context *context() {
    static FakeDevice d;
    return &d.vctx.context;
}

DeviceAttr &device_attr() {
    return g_attr;
}

void set_stack_present(bool present) {
    g_stack_present = present;
}

bool stack_present() {
    return g_stack_present;
}

void set_bind_no_device(bool on) {
    g_bind_no_device = on;
}

bool bind_no_device() {
    return g_bind_no_device;
}

void queue_wc(const ibv_wc &wc) {
    std::lock_guard lk(g_mu);
    g_wcs.push_back(wc);
}

void fire(ibv_cq *cq) {
    {
        std::lock_guard lk(g_mu);
        g_fired.push_back(cq);
    }
    uint64_t one = 1;
    if (cq->channel && ::write(cq->channel->fd, &one, sizeof(one)) != sizeof(one)) std::abort();
}

ibv_cq *take_fired() {
    std::lock_guard lk(g_mu);
    if (g_fired.empty()) return nullptr;
    ibv_cq *cq = g_fired.front();
    g_fired.pop_front();
    return cq;
}

void add_acked(unsigned n) {
    std::lock_guard lk(g_mu);
    g_acked += n;
}

unsigned acked_cq_events() {
    std::lock_guard lk(g_mu);
    return g_acked;
}

Seen &seen() {
    return g_seen;
}

}  // namespace rpma::fake
