// The tcp CM handshake of one queue pair (wire.h), apart from the RC engine: the client's set-up
// sockets, its Hello on each and the server's Reply to it; the server's accepting Reply and its
// refusal; the token; the set-up deadlines; and the way off tcp (upgrade.h), offered with the
// main Hello and kept when the Reply says so. It touches no RC state: the queue pair
// (queue_pair.h) puts the sockets into its streams, passes the engine's set-up events here and
// acts on each Step.
#pragma once

#include <librpma.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/fd.h"
#include "provider/rc/byte_stream.h"
#include "provider/soft/engine.h"
#include "provider/tcp/upgrade.h"
#include "provider/tcp/wire.h"

namespace rpma::tcp {

class Connector {
  public:
    // What a handshake step came to. kWait: more input or the connect's completion is needed;
    // kFail: the connection fails with `event`; kError: a local failure (RPMA_E_PROVIDER).
    struct Step {
        enum Kind { kDone, kWait, kFail, kError } kind = kDone;
        rpma_conn_event event = RPMA_CONN_UNDEFINED;
    };

    // upgrade: nullptr keeps every connection on tcp.
    explicit Connector(StreamUpgrade *upgrade) noexcept : upgrade_(upgrade) {}

    // TCP_NODELAY, keepalive and TCP_USER_TIMEOUT from the dead-peer timeout; both ends.
    static void set_socket_options(int fd);
    // Server: refuses a connection request on its main stream.
    static void reject(Fd &main);

    // Client: where connect() goes.
    void set_remote(const sockaddr_storage &addr, socklen_t len) noexcept {
        remote_addr_ = addr;
        remote_addr_len_ = len;
    }
    // Client: a fresh token and our private data; returns the deadline for both connects.
    Clock::time_point start(const void *pdata, uint8_t pdata_len, int timeout_ms);
    // Client: one set-up socket, its connect started into *fd.
    Step open(Fd *fd);
    // Client, on a set-up socket's writability: kWait while it connects; else its Hello, the main
    // one with our private data and the offer off tcp where the provider choice allows.
    Step send_hello(int fd, rc::ByteStream &io, bool main, uint32_t qp_num);
    // Client, both Hellos sent: when the Reply must have come.
    static Clock::time_point reply_deadline();
    // Client, on the main stream's input: reads the Reply, and nothing after it. kDone: accepted,
    // *remote_qp and *pdata set; link() says whether the streams move off tcp.
    Step read_reply(rc::ByteStream &io, uint32_t *remote_qp, std::vector<uint8_t> *pdata);

    // Server: the offer the listener took with this request (nullptr: it stays on tcp).
    void adopt(std::shared_ptr<UpgradeLink> link) noexcept { link_ = std::move(link); }
    // Server: accepts on the tcp main socket, saying whether the streams move. False if the
    // Reply could not be sent.
    bool send_accept(Fd *main, uint32_t qp_num, const void *pdata, uint8_t pdata_len);

    // Client, its set-up failed: a server that took our offer and accepted already watches only
    // the link's control socket (tcp: the streams), so it must see that socket end now.
    void end_offer() noexcept;

    // What the connection runs (or, client, may run) on instead of tcp; nullptr: tcp.
    UpgradeLink *link() const noexcept { return link_.get(); }

  private:
    // Client, before its main Hello. False if the connection must fail (RPMA_PROVIDER=shm and
    // no offer could be made).
    bool make_offer(int main_fd, Hello &h);
    // Client, on an accepting Reply: whether the server took the offer. False if it must fail.
    bool settle_offer();

    StreamUpgrade *upgrade_;
    sockaddr_storage remote_addr_{};
    socklen_t remote_addr_len_ = 0;
    uint64_t token_ = 0;
    std::vector<uint8_t> local_pdata_;
    Reply reply_{};
    size_t reply_got_ = 0;
    std::shared_ptr<UpgradeLink> link_;
};

}  // namespace rpma::tcp
