#include "provider/shm/upgrade.h"

#include "provider/shm/link.h"
#include "provider/shm/offer_desk.h"

namespace rpma::shm {

std::shared_ptr<tcp::UpgradeLink> Upgrade::offer(int tcp_fd, uint64_t token, std::string *why) {
    return Link::offer(tcp_fd, token, why);
}

std::shared_ptr<tcp::UpgradeDesk> Upgrade::open_desk(Engine *engine, uint16_t port) {
    return OfferDesk::open(engine, port);
}

tcp::StreamUpgrade *stream_upgrade() noexcept {
    static Upgrade upgrade;
    return &upgrade;
}

}  // namespace rpma::shm
