// shm as tcp's way off tcp (tcp/upgrade.h): the client's offer is a Link (link.h), the server's
// intake an OfferDesk per listening port (offer_desk.h). registry.cc hands it to the tcp device.
#pragma once

#include "provider/tcp/upgrade.h"

namespace rpma::shm {

class Upgrade final : public tcp::StreamUpgrade {
  public:
    std::shared_ptr<tcp::UpgradeLink> offer(int tcp_fd, uint64_t token, std::string *why) override;
    std::shared_ptr<tcp::UpgradeDesk> open_desk(Engine *engine, uint16_t port) override;
};

// The process's one instance; it holds no state, so loading the library opens nothing.
tcp::StreamUpgrade *stream_upgrade() noexcept;

}  // namespace rpma::shm
