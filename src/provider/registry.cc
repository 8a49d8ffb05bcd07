// Picks the provider for an address. An RDMA device that rdma_cm finds for the address serves it
// through verbs (provider/verbs/); every other address is served by the tcp device, and a
// connection between two processes on one host moves onto shared memory (shm,
// provider/shm/link.h) unless RPMA_PROVIDER says tcp: shm is the way off tcp
// (tcp/upgrade.h) that this file hands to the tcp device. RPMA_PROVIDER may name verbs, tcp or shm,
// and any other name fails, so a program asking for a provider we lack learns it at once.
#include <arpa/inet.h>
#include <netdb.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/log.h"
#include "provider/provider.h"
#include "provider/shm/upgrade.h"
#include "provider/tcp/device.h"
#include "provider/verbs/device.h"

namespace rpma::prov {

namespace {

bool provider_allowed() {
    const char *forced = std::getenv("RPMA_PROVIDER");
    if (!forced || !*forced || std::strcmp(forced, "tcp") == 0 || std::strcmp(forced, "shm") == 0 ||
        std::strcmp(forced, "verbs") == 0)
        return true;
    RPMA_LOG_ERROR("RPMA_PROVIDER=%s: no such provider (this build has: verbs, tcp, shm)", forced);
    return false;
}

// rdma_cm binds a loopback address to whichever device comes first, not to one that serves it:
// left to auto, an address that resolves to loopback (127.1, localhost, a host name that
// /etc/hosts maps to 127.0.1.1) stays on tcp and shm, on both sides of a connection. The first
// answer counts, as librdmacm takes the first. getaddrinfo parses a numeric address itself, so
// only a host name is looked up, once more than rdma_cm and tcp do themselves.
bool loopback(const char *addr) {
    if (std::strcmp(addr, "localhost") == 0) return true;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    if (::getaddrinfo(addr, nullptr, &hints, &res) != 0) return false;
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
    if (res->ai_family == AF_INET) {
        const auto *a4 = reinterpret_cast<const sockaddr_in *>(res->ai_addr);
        return (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
    }
    if (res->ai_family != AF_INET6) return false;
    const in6_addr &a6 = reinterpret_cast<const sockaddr_in6 *>(res->ai_addr)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
}

}  // namespace

Choice provider_choice() noexcept {
    const char *forced = std::getenv("RPMA_PROVIDER");
    if (forced && std::strcmp(forced, "tcp") == 0) return Choice::kTcp;
    if (forced && std::strcmp(forced, "shm") == 0) return Choice::kShm;
    if (forced && std::strcmp(forced, "verbs") == 0) return Choice::kVerbs;
    return Choice::kAuto;
}

int lookup_device(const char *addr, rpma_util_ibv_context_type type, ibv_context **out) {
    if (!provider_allowed()) return RPMA_E_PROVIDER;
    switch (provider_choice()) {
        case Choice::kVerbs:
            return verbs::Device::lookup(addr, type, false, out);
        case Choice::kAuto:
            // Without the RDMA stack (no /dev/infiniband) this costs one access(2).
            if (verbs::Device::stack_present() && !loopback(addr) &&
                verbs::Device::lookup(addr, type, true, out) == 0)
                return 0;
            break;
        case Choice::kTcp:
        case Choice::kShm:
            break;
    }
    return tcp::Device::lookup(addr, type, shm::stream_upgrade(), out);
}

Device *device_from_context(const ibv_context *ctx) noexcept {
    if (Device *d = tcp::Device::from_context(ctx)) return d;
    return verbs::Device::from_context(ctx);
}

}  // namespace rpma::prov
