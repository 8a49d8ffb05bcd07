// A peer: the protection-domain equivalent. Owns the region table and, from the first endpoint or
// connection on, the progress engine thread (none at load time, so a process may fork first).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "core/device.h"
#include "core/mr_table.h"

namespace rpma {
namespace tcp {
class Engine;
}

class Peer {
  public:
    explicit Peer(Device *dev) noexcept;
    ~Peer();

    Device *device() const noexcept { return dev_; }
    MrTable &mrs() noexcept { return mrs_; }
    // The progress engine, started on first use; nullptr if it cannot start, or if it was
    // started by the parent of this forked process.
    tcp::Engine *engine();
    // 0 if this process may use the peer's endpoints, requests and connections; in a forked
    // child once the parent started the engine: RPMA_E_PROVIDER, logged with `what`.
    int check_process(const char *what) const noexcept;

    // Objects that depend on the peer (regions, endpoints, requests, connections, SRQs).
    void ref() noexcept { users_.fetch_add(1); }
    void unref() noexcept { users_.fetch_sub(1); }
    int users() const noexcept { return users_.load(); }

  private:
    Device *dev_;
    MrTable mrs_;
    std::atomic<int> users_{0};
    std::mutex mu_;
    std::unique_ptr<tcp::Engine> engine_;
    std::atomic<tcp::Engine *> started_{nullptr};  // engine_, readable without mu_ (fork)
};

}  // namespace rpma
