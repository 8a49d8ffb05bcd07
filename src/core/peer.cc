#include "core/peer.h"

#include "provider/tcp/engine.h"

namespace rpma {

Peer::Peer(Device *dev) noexcept : dev_(dev) {}
Peer::~Peer() = default;

tcp::Engine *Peer::engine() {
    std::lock_guard lk(mu_);
    if (!engine_) {
        auto e = std::make_unique<tcp::Engine>();
        if (!e->ok()) return nullptr;
        engine_ = std::move(e);
    }
    return engine_.get();
}

}  // namespace rpma
