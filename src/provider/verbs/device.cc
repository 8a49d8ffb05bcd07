#include "provider/verbs/device.h"

#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "provider/verbs/domain.h"

namespace rpma::verbs {

namespace {

// Where rdma_cm resolves an address (REMOTE), as long as upstream's default allows.
constexpr int kResolveTimeoutMs = RPMA_DEFAULT_TIMEOUT_MS;

std::mutex g_mu;
std::vector<std::unique_ptr<Device>> g_devices;  // never freed: contexts live as long
pid_t g_opener = 0;                              // the process that opened the devices (g_mu)

// Called before the first registration.
void init_fork_support() {
    static std::once_flag once;
    std::call_once(once, [] { Device::set_up_fork_support(ibv_is_fork_initialized()); });
}

struct AddrInfoFree {
    void operator()(rdma_addrinfo *ai) const noexcept { rdma_freeaddrinfo(ai); }
};
struct CmIdFree {
    void operator()(rdma_cm_id *id) const noexcept { rdma_destroy_id(id); }
};

}  // namespace

bool Device::stack_present() noexcept {
    return ::access("/dev/infiniband/rdma_cm", F_OK) == 0;
}

int Device::set_up_fork_support(ibv_fork_status status) noexcept {
    // A kernel that copies DMA-pinned pages into a child (Linux 5.13 on) keeps a fork safe by
    // itself, and upstream librpma calls nothing. rdma-core 44's ibv_fork_init would still mark
    // every registered page MADV_DONTFORK, so that a child lost those pages and whatever shared
    // them, malloc's own chunks included.
    if (status == IBV_FORK_UNNEEDED) return 0;
    // Elsewhere registrations made after it survive a fork() in the parent (rdma-core's rule).
    int err = ibv_fork_init();
    if (err)
        RPMA_LOG_INFO("ibv_fork_init: %s (a forked child must not touch RDMA memory)",
                      std::strerror(err));
    return err;
}

int Device::lookup(const char *addr, rpma_util_ibv_context_type type, bool quiet,
                   ibv_context **out) {
    // One plain line: what is missing, then the call that said so. Forced verbs fails with it;
    // auto falls back to tcp and keeps it at INFO.
    const char *none = type == RPMA_UTIL_IBV_CONTEXT_LOCAL ? "no local RDMA device for"
                                                           : "no route to an RDMA device for";
    auto miss = [&](const char *what, const char *why, int err) {
        if (quiet)
            RPMA_LOG_INFO("verbs: %s '%s' (%s%s%s)", what, addr, why, err ? ": " : "",
                          err ? std::strerror(err) : "");
        else
            RPMA_LOG_ERROR("RPMA_PROVIDER=verbs: %s '%s' (%s%s%s)", what, addr, why,
                           err ? ": " : "", err ? std::strerror(err) : "");
        return RPMA_E_PROVIDER;
    };
    if (!stack_present()) return miss(none, "this host has no /dev/infiniband/rdma_cm", 0);
    {
        // rdma-core's fork rule: the devices librdmacm opened belong to the process that opened
        // them; a child would share their command channel with its parent.
        std::lock_guard lk(g_mu);
        if (g_opener && g_opener != ::getpid())
            return miss(none, "the parent process opened the RDMA devices before fork()", 0);
        g_opener = ::getpid();
    }
    init_fork_support();
    rdma_addrinfo hints{};
    hints.ai_port_space = RDMA_PS_TCP;
    if (type == RPMA_UTIL_IBV_CONTEXT_LOCAL) hints.ai_flags = RAI_PASSIVE;
    rdma_addrinfo *raw = nullptr;
    if (rdma_getaddrinfo(addr, nullptr, &hints, &raw) != 0)
        return miss("cannot resolve", "rdma_getaddrinfo", errno);
    std::unique_ptr<rdma_addrinfo, AddrInfoFree> ai(raw);
    rdma_cm_id *id_raw = nullptr;
    if (rdma_create_id(nullptr, &id_raw, nullptr, RDMA_PS_TCP) != 0)
        return miss(none, "rdma_create_id", errno);
    std::unique_ptr<rdma_cm_id, CmIdFree> id(id_raw);
    if (type == RPMA_UTIL_IBV_CONTEXT_LOCAL) {
        if (rdma_bind_addr(id.get(), ai->ai_src_addr) != 0)
            return miss(none, "rdma_bind_addr", errno);
    } else if (rdma_resolve_addr(id.get(), ai->ai_src_addr, ai->ai_dst_addr, kResolveTimeoutMs) !=
               0) {
        return miss(none, "rdma_resolve_addr", errno);
    }
    ibv_context *ctx = id->verbs;
    if (!ctx) return miss(none, "rdma_cm bound it to no device", 0);
    std::lock_guard lk(g_mu);
    for (auto &d : g_devices)
        if (d->ctx_ == ctx) {
            *out = ctx;
            return 0;
        }
    g_devices.push_back(std::make_unique<Device>(ctx));
    RPMA_LOG_INFO("verbs: '%s' is served by %s", addr, ibv_get_device_name(ctx->device));
    *out = ctx;
    return 0;
}

Device *Device::from_context(const ibv_context *ctx) noexcept {
    std::lock_guard lk(g_mu);
    for (auto &d : g_devices)
        if (d->ctx_ == ctx) return d.get();
    return nullptr;
}

int Device::odp_capable(int *out) {
    ibv_device_attr_ex attr{};
    if (int err = ibv_query_device_ex(ctx_, nullptr, &attr)) {
        RPMA_LOG_ERROR("ibv_query_device_ex: %s", std::strerror(err));
        return RPMA_E_PROVIDER;
    }
    // Every RC operation rpma posts must be able to fault pages in.
    const uint32_t rc_needed =
        IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ;
    *out = (attr.odp_caps.general_caps & IBV_ODP_SUPPORT) &&
           (attr.odp_caps.per_transport_caps.rc_odp_caps & rc_needed) == rc_needed;
    return 0;
}

int Device::open_domain(std::unique_ptr<prov::Domain> *out) {
    std::unique_ptr<Domain> d;
    if (int ret = Domain::create(ctx_, &d)) return ret;
    *out = std::move(d);
    return 0;
}

}  // namespace rpma::verbs
