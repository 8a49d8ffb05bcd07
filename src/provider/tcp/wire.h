// The tcp provider's connection set-up on the wire: the Hello that opens each of a connection's
// two TCP streams and the server's Reply. The frames after it are the RC engine's
// (provider/rc/frame.h). See docs/tcp-provider.md.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "provider/rc/frame.h"

namespace rpma::tcp {

constexpr uint32_t kMagic = 0x414d5052;   // "RPMA"
constexpr uint16_t kProtocolVersion = 2;  // 2: the header carries a cumulative ack
constexpr size_t kConnectPdataMax = 56;   // as RDMA CM allows on connect
constexpr size_t kAcceptPdataMax = 196;   // and on accept

enum class StreamRole : uint8_t {
    kMain = 1,  // carries the client's requests and the server's responses; and the CM exchange
    kJoin = 2,  // carries the server's requests and the client's responses
};

// First message on each new TCP connection, client -> server.
struct Hello {
    uint32_t magic;
    uint16_t version;
    uint8_t role;  // StreamRole
    uint8_t pdata_len;
    uint64_t token;  // pairs the two streams of one connection
    uint32_t qp_num;
    uint32_t flags;  // kHelloShmOffer
    uint8_t pdata[kConnectPdataMax];
};
static_assert(sizeof(Hello) == 80);

// Hello::flags on the main stream: the client sent a shared-memory offer with this token to the
// server's unix socket (provider/shm/link.h) before this Hello.
constexpr uint32_t kHelloShmOffer = 1;

enum class ReplyKind : uint8_t { kAccept = 1, kReject = 2 };

// The server's answer on the main stream.
struct Reply {
    uint32_t magic;
    uint8_t kind;  // ReplyKind
    uint8_t pdata_len;
    uint16_t flags;  // kReplyShm
    uint32_t qp_num;
    uint8_t pdata[kAcceptPdataMax];
};
static_assert(sizeof(Reply) == 208);

// Private data as RDMA CM delivers it: the whole field (56 bytes on connect, 196 on accept), the
// `len` bytes sent first and zeros after, whatever else the peer left there. Upstream
// applications count on a non-NULL pointer even when the peer sent nothing.
template <size_t N>
std::vector<uint8_t> delivered_pdata(const uint8_t (&field)[N], uint8_t len) {
    std::vector<uint8_t> v(N, 0);
    std::memcpy(v.data(), field, std::min<size_t>(len, N));
    return v;
}

// Reply::flags: the server took the offer; after this Reply both streams run on shared memory
// and nothing more is sent on tcp.
constexpr uint16_t kReplyShm = 1;

}  // namespace rpma::tcp
