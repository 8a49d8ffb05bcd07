// A tcp "device": one local IP address. The library owns the ibv_context handed out for it, as
// upstream's rdma_cm does; the context is only a token that rpma_peer_new maps back here.
#pragma once

#include <librpma.h>
#include <sys/socket.h>

#include <string>

#include "provider/provider.h"

namespace rpma::tcp {

class StreamUpgrade;

class Device final : public prov::Device {
  public:
    // rpma_utils_get_ibv_context: the device owning addr (LOCAL) or routing to it (REMOTE).
    // upgrade: the way off tcp its connections may take (upgrade.h; nullptr: none), fixed by
    // the lookup that creates the device.
    static int lookup(const char *addr, rpma_util_ibv_context_type type, StreamUpgrade *upgrade,
                      ibv_context **out);
    // The device behind a context this provider handed out, or nullptr.
    static Device *from_context(const ibv_context *ctx) noexcept;

    ibv_context *context() noexcept override { return &ctx_; }
    // The tcp provider touches memory from the CPU only: nothing to page in on demand.
    int odp_capable(int *out) override {
        *out = 0;
        return 0;
    }
    int open_domain(std::unique_ptr<prov::Domain> *out) override;

    Device(const sockaddr_storage &ss, std::string address, StreamUpgrade *upgrade);

  private:
    ibv_context ctx_{};
    ibv_device dev_{};
    sockaddr_storage ss_{};
    std::string address_;
    StreamUpgrade *upgrade_;
};

}  // namespace rpma::tcp
