// The libibverbs entry points the verbs provider calls, replaced at link time (--wrap). A
// destroy call scripted to fail still frees its object, so the failure is only the one the
// provider must log.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fake_internal.h"

using namespace rpma::fake;

namespace {

template <class T>
T *make(const char *kind) {
    born(kind);
    return new T{};
}

template <class T>
void unmake(const char *kind, T *obj) {
    died(kind);
    delete obj;
}

uint32_t g_next_key = 0x100;

void set_errno(int err) {
    errno = err == kNoErrno ? 0 : err;
}

}  // namespace

extern "C" {

int __wrap_ibv_fork_init(void) {
    return hit("ibv_fork_init");
}

// A kernel that does not copy DMA-pinned pages into a child: rpma calls ibv_fork_init.
ibv_fork_status __wrap_ibv_is_fork_initialized(void) {
    hit("ibv_is_fork_initialized");
    return IBV_FORK_DISABLED;
}

const char *__wrap_ibv_get_device_name(ibv_device *device) {
    return device->name;
}

int __wrap_ibv_query_device(ibv_context *, ibv_device_attr *attr) {
    std::memset(attr, 0, sizeof(*attr));
    return hit("ibv_query_device");
}

// The non-inline ibv_query_port, which the inline one falls back to without a query_port op:
// the fake context has one, so this is never reached.
int __wrap_ibv_query_port(ibv_context *, uint8_t, void *) {
    return hit("ibv_query_port (legacy)") ? EIO : ENOSYS;
}

ibv_pd *__wrap_ibv_alloc_pd(ibv_context *ctx) {
    if (int err = hit("ibv_alloc_pd")) {
        set_errno(err);
        return nullptr;
    }
    auto *pd = make<ibv_pd>("pd");
    pd->context = ctx;
    return pd;
}

int __wrap_ibv_dealloc_pd(ibv_pd *pd) {
    unmake("pd", pd);
    return hit("ibv_dealloc_pd");
}

static ibv_mr *reg_mr(ibv_pd *pd, void *addr, size_t length, int access) {
    seen().reg_mr_access = access;
    if (int err = hit("ibv_reg_mr")) {
        set_errno(err);
        return nullptr;
    }
    auto *mr = make<ibv_mr>("mr");
    mr->context = pd->context;
    mr->pd = pd;
    mr->addr = addr;
    mr->length = length;
    mr->lkey = ++g_next_key;
    mr->rkey = ++g_next_key;
    return mr;
}

ibv_mr *__wrap_ibv_reg_mr(ibv_pd *pd, void *addr, size_t length, int access) {
    return reg_mr(pd, addr, length, access);
}

ibv_mr *__wrap_ibv_reg_mr_iova2(ibv_pd *pd, void *addr, size_t length, uint64_t,
                                unsigned int access) {
    return reg_mr(pd, addr, length, static_cast<int>(access));
}

int __wrap_ibv_dereg_mr(ibv_mr *mr) {
    unmake("mr", mr);
    return hit("ibv_dereg_mr");
}

ibv_comp_channel *__wrap_ibv_create_comp_channel(ibv_context *ctx) {
    if (int err = hit("ibv_create_comp_channel")) {
        set_errno(err);
        return nullptr;
    }
    auto *ch = make<ibv_comp_channel>("comp_channel");
    ch->context = ctx;
    // one unit per fired CQ (fake::fire), so a poll sees it; non-blocking: the fakes never block
    ch->fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
    return ch;
}

int __wrap_ibv_destroy_comp_channel(ibv_comp_channel *ch) {
    ::close(ch->fd);
    unmake("comp_channel", ch);
    return hit("ibv_destroy_comp_channel");
}

ibv_cq *__wrap_ibv_create_cq(ibv_context *ctx, int cqe, void *cq_context, ibv_comp_channel *ch,
                             int) {
    if (int err = hit("ibv_create_cq")) {
        set_errno(err);
        return nullptr;
    }
    auto *cq = make<ibv_cq>("cq");
    cq->context = ctx;
    cq->channel = ch;
    cq->cq_context = cq_context;
    cq->cqe = cqe;
    return cq;
}

int __wrap_ibv_destroy_cq(ibv_cq *cq) {
    unmake("cq", cq);
    return hit("ibv_destroy_cq");
}

int __wrap_ibv_get_cq_event(ibv_comp_channel *ch, ibv_cq **cq, void **cq_context) {
    if (int err = hit("ibv_get_cq_event")) {
        errno = err;
        return -1;
    }
    ibv_cq *fired = take_fired();
    if (!fired) {
        errno = EAGAIN;  // a non-blocking channel with nothing pending
        return -1;
    }
    uint64_t unit;
    if (::read(ch->fd, &unit, sizeof(unit)) != sizeof(unit)) std::abort();
    *cq = fired;
    *cq_context = fired->cq_context;
    return 0;
}

void __wrap_ibv_ack_cq_events(ibv_cq *, unsigned int nevents) {
    hit("ibv_ack_cq_events");
    add_acked(nevents);
}

ibv_srq *__wrap_ibv_create_srq(ibv_pd *pd, ibv_srq_init_attr *) {
    if (int err = hit("ibv_create_srq")) {
        set_errno(err);
        return nullptr;
    }
    auto *srq = make<ibv_srq>("srq");
    srq->context = pd->context;
    srq->pd = pd;
    return srq;
}

int __wrap_ibv_destroy_srq(ibv_srq *srq) {
    unmake("srq", srq);
    return hit("ibv_destroy_srq");
}

}  // extern "C"
