// How a tcp connection between two processes on one host moves onto shared memory. The client
// offers: it creates the rings (segment.h) and the four doorbells, connects to the server's
// unix socket for the endpoint's port and sends them there with SCM_RIGHTS, before its first
// Hello on tcp. The server's listener pairs the offer with the tcp request by token, and the
// server's accept answers, in the tcp Reply, whether the connection moves. Only then does either
// side use the rings; the unix connection stays open as the control socket, whose end tells a
// side that the peer's process is gone. See docs/shm-provider.md.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/fd.h"
#include "provider/shm/segment.h"
#include "provider/shm/shm_stream.h"
#include "provider/tcp/upgrade.h"

namespace rpma::shm {

constexpr uint32_t kOfferMagic = 0x4d485352;  // "RSHM"
constexpr uint16_t kOfferVersion = 1;
constexpr uint32_t kDefaultRingSize = 256 * 1024;

// The offer's message on the unix socket; the descriptors ride with it (FdIndex order).
struct Offer {
    uint32_t magic;
    uint16_t version;
    uint16_t nfds;
    uint64_t token;  // the tcp connection's (tcp/wire.h Hello)
    uint32_t ring_size;
    uint32_t reserved;
};
static_assert(sizeof(Offer) == 24);

enum FdIndex { kMemfd, kClientMain, kClientJoin, kServerMain, kServerJoin, kNumFds };

// The peer at the other end of a unix connection may share memory with us: same user, same
// PID namespace. False with *why set.
bool peer_allowed(int unix_fd, std::string *why);

// The abstract unix socket a listener on `port` serves offers on.
std::string socket_name(uint16_t port);

// One connection's shared memory, doorbells and control socket, on either side.
class Link final : public tcp::UpgradeLink, public std::enable_shared_from_this<Link> {
  public:
    // The client's: nullptr (and *why) when the connection cannot move, e.g. the peer is on
    // another host or nobody takes offers there. tcp_fd: the connected main tcp stream.
    static std::shared_ptr<Link> offer(int tcp_fd, uint64_t token, std::string *why);
    // The server's, from an offer read off the unix connection `ctl` (read_offer).
    static std::shared_ptr<Link> accept_offer(Fd ctl, const Offer &o, Fd *fds, int nfds,
                                              std::string *why);
    // Reads one offer (non-blocking). 1: read; 0: nothing yet; -1: bad or closed (*why).
    static int read_offer(int ctl, Offer *o, Fd *fds, int *nfds, std::string *why);

    uint64_t token() const noexcept { return token_; }
    int ctl_fd() const noexcept override { return ctl_.get(); }
    // Our doorbell for the main or the join stream: the fd the engine watches (handed over once).
    Fd take_wake(bool main) noexcept override;
    // The byte stream for the main or the join stream; it keeps the link alive.
    std::unique_ptr<rc::ByteStream> stream(bool main, int wake_fd) override;
    // The peer's process is gone: every stream of this link ends once read.
    void peer_gone() noexcept override;

  private:
    Link() = default;

    bool client_ = false;
    uint64_t token_ = 0;
    Segment seg_;
    Fd ctl_;
    Fd fds_[kNumFds];  // the doorbells; kMemfd stays in seg_
    ShmStream *streams_[2] = {nullptr, nullptr};
};

}  // namespace rpma::shm
