#include "core/peer.h"

#include "provider/tcp/engine.h"

namespace rpma {

Peer::Peer(Device *dev) noexcept : dev_(dev) {}
Peer::~Peer() = default;

tcp::Engine *Peer::engine() {
    // Checked before mu_: a parent thread may have held it when the process forked.
    if (check_process("the peer's progress engine")) return nullptr;
    std::lock_guard lk(mu_);
    if (!engine_) {
        auto e = std::make_unique<tcp::Engine>();
        if (!e->ok()) return nullptr;
        engine_ = std::move(e);
        started_.store(engine_.get(), std::memory_order_release);
    }
    return engine_.get();
}

int Peer::check_process(const char *what) const noexcept {
    tcp::Engine *e = started_.load(std::memory_order_acquire);
    return e ? e->check_process(what) : 0;
}

}  // namespace rpma
