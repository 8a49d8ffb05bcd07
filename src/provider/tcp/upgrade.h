// The seam through which a tcp connection may leave tcp once it is set up: between processes of
// one host its two streams move onto shared memory (shm/upgrade.h implements it). The client
// offers with its main Hello, the server's listener takes the offer by token, and the Reply says
// whether the connection moves (wire.h). Whoever builds the tcp device passes one in
// (registry.cc); tcp/ includes no other transport. nullptr: every connection stays on tcp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/fd.h"
#include "provider/rc/byte_stream.h"
#include "provider/soft/engine.h"

namespace rpma::tcp {

// One connection's way off tcp: offered (client) or taken (server), used once the Reply says so.
class UpgradeLink {
  public:
    virtual ~UpgradeLink() = default;
    // The socket whose end tells that the peer's process is gone; the queue pair watches it.
    virtual int ctl_fd() const noexcept = 0;
    // The fd the engine watches for the main or the join stream (handed over once).
    virtual Fd take_wake(bool main) noexcept = 0;
    // The byte stream for the main or the join stream; it keeps the link alive.
    virtual std::unique_ptr<rc::ByteStream> stream(bool main, int wake_fd) = 0;
    // The peer's process is gone: every stream of this link ends once read.
    virtual void peer_gone() noexcept = 0;
};

// A listening endpoint's intake of offers, by the clients' tokens. Engine thread only.
class UpgradeDesk {
  public:
    virtual ~UpgradeDesk() = default;
    // The offer that came with this token; nullptr and *why if none came or it was unusable.
    virtual std::shared_ptr<UpgradeLink> take(uint64_t token, std::string *why) = 0;
    // Stops taking offers and drops those held.
    virtual void close() = 0;
};

class StreamUpgrade {
  public:
    virtual ~StreamUpgrade() = default;
    // Client, with the connected main tcp socket, before its Hello: nullptr and *why when this
    // connection cannot move.
    virtual std::shared_ptr<UpgradeLink> offer(int tcp_fd, uint64_t token, std::string *why) = 0;
    // Server, for the bound tcp port, before it listens: nullptr where no offers can be taken.
    virtual std::shared_ptr<UpgradeDesk> open_desk(Engine *engine, uint16_t port) = 0;
};

}  // namespace rpma::tcp
