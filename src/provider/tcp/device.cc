#include "provider/tcp/device.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "common/fd.h"
#include "common/log.h"
#include "provider/tcp/domain.h"

namespace rpma::tcp {

namespace {

// The port of a REMOTE lookup's throw-away connect: a UDP connect sends nothing, any port routes.
constexpr uint16_t kRouteProbePort = 9;

std::mutex g_mu;
std::vector<std::unique_ptr<Device>> g_devices;  // never freed: contexts stay valid for the process

std::string to_string(const sockaddr_storage &ss) {
    char buf[INET6_ADDRSTRLEN] = "?";
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in &>(ss).sin_addr, buf, sizeof(buf));
    else if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 &>(ss).sin6_addr, buf,
                  sizeof(buf));
    return buf;
}

// The local address for addr: itself if it is bound to this host (LOCAL), or the source address
// the kernel would route from (REMOTE). Both are checked with a throw-away UDP socket.
bool local_address_for(const addrinfo *ai, rpma_util_ibv_context_type type, sockaddr_storage *out) {
    Fd s(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) return false;
    sockaddr_storage ss{};
    std::memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    if (type == RPMA_UTIL_IBV_CONTEXT_LOCAL) {
        if (ss.ss_family == AF_INET) reinterpret_cast<sockaddr_in &>(ss).sin_port = 0;
        if (ss.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6 &>(ss).sin6_port = 0;
        if (::bind(s.get(), reinterpret_cast<sockaddr *>(&ss), ai->ai_addrlen) != 0) return false;
        *out = ss;
        return true;
    }
    if (ss.ss_family == AF_INET)
        reinterpret_cast<sockaddr_in &>(ss).sin_port = htons(kRouteProbePort);
    if (ss.ss_family == AF_INET6)
        reinterpret_cast<sockaddr_in6 &>(ss).sin6_port = htons(kRouteProbePort);
    if (::connect(s.get(), reinterpret_cast<sockaddr *>(&ss), ai->ai_addrlen) != 0) return false;
    socklen_t len = sizeof(*out);
    if (::getsockname(s.get(), reinterpret_cast<sockaddr *>(out), &len) != 0) return false;
    return true;
}

}  // namespace

Device::Device(const sockaddr_storage &ss, std::string address, StreamUpgrade *upgrade)
    : ss_(ss), address_(std::move(address)), upgrade_(upgrade) {
    std::snprintf(dev_.name, sizeof(dev_.name), "rpma_tcp");
    std::snprintf(dev_.dev_name, sizeof(dev_.dev_name), "tcp:%s", address_.c_str());
    dev_.transport_type = IBV_TRANSPORT_UNKNOWN;
    ctx_.device = &dev_;
}

int Device::lookup(const char *addr, rpma_util_ibv_context_type type, StreamUpgrade *upgrade,
                   ibv_context **out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo *res = nullptr;
    int rc = ::getaddrinfo(addr, nullptr, &hints, &res);
    if (rc != 0) {
        RPMA_LOG_ERROR("cannot resolve '%s': %s", addr, gai_strerror(rc));
        return RPMA_E_PROVIDER;
    }
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
    sockaddr_storage local{};
    bool found = false;
    for (addrinfo *ai = res; ai && !found; ai = ai->ai_next)
        found = local_address_for(ai, type, &local);
    if (!found) {
        RPMA_LOG_ERROR("no %s device for '%s'",
                       type == RPMA_UTIL_IBV_CONTEXT_LOCAL ? "local" : "route to a", addr);
        return RPMA_E_PROVIDER;
    }
    std::string name = to_string(local);
    std::lock_guard lk(g_mu);
    for (auto &d : g_devices)
        if (d->address_ == name) {
            *out = d->context();
            return 0;
        }
    g_devices.push_back(std::make_unique<Device>(local, name, upgrade));
    *out = g_devices.back()->context();
    return 0;
}

Device *Device::from_context(const ibv_context *ctx) noexcept {
    std::lock_guard lk(g_mu);
    for (auto &d : g_devices)
        if (&d->ctx_ == ctx) return d.get();
    return nullptr;
}

int Device::open_domain(std::unique_ptr<prov::Domain> *out) {
    *out = std::make_unique<Domain>(upgrade_);
    return 0;
}

}  // namespace rpma::tcp
