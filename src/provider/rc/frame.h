// The RC engine's frames, whatever carries them. Everything is little-endian and fixed-size, so a
// header is bounded before any field is used. See docs/tcp-provider.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rpma::rc {

constexpr uint32_t kMaxOpLength = 1u << 30;  // one operation moves at most 1 GiB

enum class Op : uint8_t {
    // requests (requester -> responder)
    kWrite = 1,
    kWriteImm = 2,
    kRead = 3,
    kAtomicWrite = 4,
    kFlush = 5,
    kSend = 6,
    kSendImm = 7,
    // responses (responder -> requester)
    kAck = 16,       // every request up to seq done
    kReadResp = 17,  // seq's data follows (length bytes)
    kNak = 18,       // seq failed with status; the queue pair is in error
    // both directions: end of this stream, orderly
    kDisconnect = 32,
};

enum FrameFlags : uint8_t {
    kFlushPersistent = 1,  // flush: to persistence, not only visibility
    kAckRequested = 0x80,  // request: answer with an ACK now (signaled, or the SQ needs slots)
};

// NAK statuses on the wire; mapped to ibv_wc_status at the requester.
enum class NakStatus : uint16_t { kAccess = 1, kInvalidRequest = 2, kOperation = 3 };

// 40-byte frame header. Requests carry no sequence number: both ends count them in order.
struct FrameHeader {
    uint8_t op;
    uint8_t flags;
    uint16_t status;
    uint32_t imm;
    uint32_t length;  // payload bytes that follow, or the length asked for (read, flush)
    uint32_t rkey;
    uint64_t addr;  // remote address (requests)
    uint64_t aux;   // atomic value (requests) or sequence number (responses)
    // Requests: the last of the receiver's requests the sender has executed. The receiver applies
    // it before the request, so a reaction never completes before what it reacted to.
    uint64_t ack;
};
static_assert(sizeof(FrameHeader) == 40);
constexpr size_t kHeaderSize = sizeof(FrameHeader);

// True for an op a requester may send; anything else on a request stream is a protocol error.
inline bool is_request(uint8_t op) noexcept {
    return op >= static_cast<uint8_t>(Op::kWrite) && op <= static_cast<uint8_t>(Op::kSendImm);
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format assumes little-endian hosts");

}  // namespace rpma::rc
