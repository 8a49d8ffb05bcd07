// Picks the provider for an address. The tcp device serves every address; a connection between
// two processes on one host moves onto shared memory (shm, provider/shm/link.h) unless
// RPMA_PROVIDER says tcp. RPMA_PROVIDER may name tcp or shm, and any other name fails, so a
// program asking for a provider we lack learns it at once.
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "provider/provider.h"
#include "provider/tcp/device.h"

namespace rpma::prov {

namespace {

bool provider_allowed() {
    const char *forced = std::getenv("RPMA_PROVIDER");
    if (!forced || !*forced || std::strcmp(forced, "tcp") == 0 || std::strcmp(forced, "shm") == 0)
        return true;
    RPMA_LOG_ERROR("RPMA_PROVIDER=%s: no such provider (this build has: tcp, shm)", forced);
    return false;
}

}  // namespace

Choice provider_choice() noexcept {
    const char *forced = std::getenv("RPMA_PROVIDER");
    if (forced && std::strcmp(forced, "tcp") == 0) return Choice::kTcp;
    if (forced && std::strcmp(forced, "shm") == 0) return Choice::kShm;
    return Choice::kAuto;
}

int lookup_device(const char *addr, rpma_util_ibv_context_type type, ibv_context **out) {
    if (!provider_allowed()) return RPMA_E_PROVIDER;
    return tcp::Device::lookup(addr, type, out);
}

Device *device_from_context(const ibv_context *ctx) noexcept {
    return tcp::Device::from_context(ctx);
}

}  // namespace rpma::prov
