#include "core/peer.h"

#include <new>

namespace rpma {

int Peer::create(prov::Device *dev, Peer **out) {
    std::unique_ptr<prov::Domain> d;
    if (int ret = dev->open_domain(&d)) return ret;
    auto *p = new (std::nothrow) Peer(std::move(d));
    if (!p) return RPMA_E_NOMEM;
    *out = p;
    return 0;
}

Peer::~Peer() = default;

bool Peer::try_retire() noexcept {
    // A user appearing after a zero count would be a use after delete by the application; the
    // exchange keeps two concurrent deletes from both succeeding.
    int expected = 0;
    return users_.compare_exchange_strong(expected, -1);
}

}  // namespace rpma
