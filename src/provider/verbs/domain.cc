#include "provider/verbs/domain.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "common/process.h"
#include "provider/verbs/completion_channel.h"
#include "provider/verbs/completion_queue.h"
#include "provider/verbs/listener.h"
#include "provider/verbs/queue_pair.h"
#include "provider/verbs/region.h"
#include "provider/verbs/shared_recv_queue.h"

namespace rpma::verbs {

namespace {

// What RDMA CM carries as private data on RC: a REQ 56 bytes, a REP 196 (IBTA CM).
constexpr uint8_t kConnectPdataMax = 56;
constexpr uint8_t kAcceptPdataMax = 196;

int access_for(int usage, ibv_transport_type transport) {
    int access = 0;
    if (usage & (RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
                 RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT))
        access |= IBV_ACCESS_REMOTE_READ;  // a flush is emulated by a read
    if (usage & RPMA_MR_USAGE_READ_DST) {
        access |= IBV_ACCESS_LOCAL_WRITE;
        // iWARP carries a read as a write from the responder.
        if (transport == IBV_TRANSPORT_IWARP) access |= IBV_ACCESS_REMOTE_WRITE;
    }
    // Upstream asks LOCAL_WRITE for a write source too; registrations must match its verdicts.
    if (usage & (RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_RECV)) access |= IBV_ACCESS_LOCAL_WRITE;
    if (usage & RPMA_MR_USAGE_WRITE_DST)
        access |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;  // verbs require both
    return access;
}

}  // namespace

int Domain::create(ibv_context *ctx, std::unique_ptr<Domain> *out) {
    ibv_device_attr_ex attr{};
    if (int err = ibv_query_device_ex(ctx, nullptr, &attr)) {
        RPMA_LOG_ERROR("ibv_query_device_ex: %s", std::strerror(err));
        return RPMA_E_PROVIDER;
    }
    ibv_port_attr port{};
    uint32_t max_msg = 1u << 30;
    if (ibv_query_port(ctx, 1, &port) == 0 && port.max_msg_sz > 0) max_msg = port.max_msg_sz;
    bool native_aw = false;
#ifdef RPMA_HAVE_IBV_ATOMIC_WRITE
    native_aw = attr.device_cap_flags_ex & IB_UVERBS_DEVICE_ATOMIC_WRITE;
#endif
    if (!native_aw)
        RPMA_LOG_INFO("verbs: %s has no native atomic write; an inline fenced write is used",
                      ibv_get_device_name(ctx->device));
    bool odp = attr.odp_caps.general_caps & IBV_ODP_SUPPORT;
    errno = 0;
    ibv_pd *pd = ibv_alloc_pd(ctx);
    if (!pd) {
        if (errno == ENOMEM) return RPMA_E_NOMEM;
        if (errno == 0) {
            RPMA_LOG_ERROR("ibv_alloc_pd failed without an error number");
            return RPMA_E_UNKNOWN;
        }
        RPMA_LOG_ERROR("ibv_alloc_pd: %s", std::strerror(errno));
        return RPMA_E_PROVIDER;
    }
    prov::Caps caps{max_msg, kConnectPdataMax, kAcceptPdataMax, true};
    out->reset(new Domain(ctx, pd, caps, native_aw, odp));
    return 0;
}

Domain::Domain(ibv_context *ctx, ibv_pd *pd, const prov::Caps &caps, bool native_aw,
               bool odp) noexcept
    : ctx_(ctx),
      pd_(pd),
      caps_(caps),
      native_atomic_write_(native_aw),
      odp_(odp),
      pid_(::getpid()) {}

Domain::~Domain() {
    if (::getpid() != pid_) return;  // the parent's objects: a child leaves them alone
    if (int err = ibv_dealloc_pd(pd_)) RPMA_LOG_ERROR("ibv_dealloc_pd: %s", std::strerror(err));
}

int Domain::check_process(const char *what) const noexcept {
    if (this_process() == pid_) return 0;
    RPMA_LOG_ERROR("%s belongs to the parent process: verbs objects do not cross fork()", what);
    return RPMA_E_PROVIDER;
}

int Domain::register_memory(char *addr, size_t size, int usage,
                            std::shared_ptr<prov::MemoryRegion> *out) {
    if (int ret = check_process("the peer")) return ret;
    int access = access_for(usage, ctx_->device->transport_type);
    ibv_mr *mr = ibv_reg_mr(pd_, addr, size, access);
    int err = mr ? 0 : errno;  // kept: a log function may change errno
    if (!mr && err == EOPNOTSUPP && odp_) {
        // Memory the device cannot pin (a DAX file, say) may still be paged on demand.
        mr = ibv_reg_mr(pd_, addr, size, access | IBV_ACCESS_ON_DEMAND);
        err = mr ? 0 : errno;
        if (!mr)
            RPMA_LOG_ERROR("ibv_reg_mr(%p, %zu, On-Demand Paging): %s", static_cast<void *>(addr),
                           size, std::strerror(err));
    } else if (!mr) {
        RPMA_LOG_ERROR("ibv_reg_mr(%p, %zu, access 0x%x): %s%s", static_cast<void *>(addr), size,
                       access, std::strerror(err),
                       err == EOPNOTSUPP ? " (and the device has no On-Demand Paging)" : "");
    }
    if (!mr) return err == ENOMEM ? RPMA_E_NOMEM : RPMA_E_PROVIDER;
    *out = std::make_shared<Region>(mr, usage);
    return 0;
}

void Domain::deregister(const std::shared_ptr<prov::MemoryRegion> &mr) noexcept {
    static_cast<Region *>(mr.get())->release(::getpid() == pid_);
}

int Domain::advise(const prov::MemoryRegion &mr, char *start, size_t len, int advice,
                   uint32_t flags) {
    if (int ret = check_process("the memory region")) return ret;
    ibv_sge sge{reinterpret_cast<uintptr_t>(start), static_cast<uint32_t>(len),
                static_cast<const Region &>(mr).lkey()};
    int err = ibv_advise_mr(pd_, static_cast<ibv_advise_mr_advice>(advice), flags, &sge, 1);
    if (err == 0) return 0;
    RPMA_LOG_ERROR("ibv_advise_mr: %s", std::strerror(err));
    if (err == EOPNOTSUPP || err == ENOTSUP) return RPMA_E_NOSUPP;
    if (err == EFAULT || err == EINVAL) return RPMA_E_INVAL;
    return RPMA_E_PROVIDER;
}

int Domain::create_channel(std::unique_ptr<prov::CompletionChannel> *out) {
    if (int ret = check_process("the peer")) return ret;
    return CompletionChannel::create(ctx_, out);
}

int Domain::create_cq(prov::CompletionChannel *channel, bool shared, uint32_t size,
                      std::unique_ptr<prov::CompletionQueue> *out) {
    return CompletionQueue::create(ctx_, static_cast<CompletionChannel *>(channel), shared, size,
                                   out);
}

int Domain::create_srq(uint32_t size, std::unique_ptr<prov::SharedRecvQueue> *out) {
    if (int ret = check_process("the peer")) return ret;
    return SharedRecvQueue::create(pd_, size, out);
}

int Domain::listen(const char *addr, const char *port, std::shared_ptr<prov::Listener> *out) {
    if (int ret = check_process("the peer")) return ret;
    return Listener::create(addr, port, out);
}

int Domain::create_qp(const char *addr, const char *port, const prov::QpAttr &attr,
                      std::shared_ptr<prov::QueuePair> *out) {
    if (int ret = check_process("the peer")) return ret;
    return QueuePair::create_active(*this, addr, port, attr, out);
}

int Domain::create_qp(const prov::QpAttr &attr, prov::IncomingRequest &req,
                      std::shared_ptr<prov::QueuePair> *out) {
    if (int ret = check_process("the peer")) return ret;
    return QueuePair::create_passive(*this, attr, static_cast<ConnectRequest &>(req), out);
}

}  // namespace rpma::verbs
