// What the parts of the RC queue pair share (queue_pair.cc defines the functions). Internal to
// the RC engine.
#pragma once

#include <errno.h>
#include <infiniband/verbs.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "provider/rc/frame.h"
#include "provider/soft/engine.h"

namespace rpma::rc {

// Small frames are read many per recv into the staging buffer and copied out (a 4 KiB write:
// a memcpy instead of a recv of its own); payloads of kDirectThreshold and more are read
// straight into their target, with the next header behind them.
constexpr size_t kStagingSize = 64 * 1024;

// A stream end the peer's kernel made, without the peer's Disconnect: an orderly end or a
// reset, as when its process exits or is killed. RDMA CM reports that as a disconnect (the
// kernel sends a DREQ for a dying process), so it gives CLOSED; a timeout or an unreachable
// network gives LOST. n and err: what the failed read or write returned, and its errno.
inline bool ended_by_peer(ssize_t n, int err) noexcept {
    return n == 0 || err == ECONNRESET || err == EPIPE;
}
constexpr size_t kDirectThreshold = 8192;
constexpr int kMaxIov = 64;
// Bytes per sendmsg at most. TCP pushes a call's segments to the peer as it copies them only
// in part (at its end, or once half a window is queued), so one call of several MiB lets the
// receiver sit idle while the sender copies, then copy it all from a cold cache. In half-MiB
// calls the two copies overlap: 1.2-1.7x the bandwidth of 64 KiB and 1 MiB transfers
// (docs/performance.md); 256 KiB calls measured worse for 1 MiB reads.
#ifdef RPMA_SEND_CHUNK  // a benchmark build's other value (CMake's RPMA_SEND_CHUNK)
constexpr size_t kSendChunk = RPMA_SEND_CHUNK;
#else
constexpr size_t kSendChunk = 512 * 1024;
#endif
// With this many requests outstanding and an answer on its way, a post only queues its frame
// and leaves the requester alone: the thread that reads that answer runs it, sending every
// frame queued by then in one sendmsg. Below it (depth-1 latency, GPSPM) every post runs the
// requester (or arms it) at once.
constexpr size_t kCorkDepth = 8;
// Read answers the responder lets queue before it sends them itself: one sendmsg gathers a
// header and a payload per frame, so this many fill its iovec list.
constexpr size_t kAnswersPerSend = kMaxIov / 2;
// Reads per call: small, so the engine round-robins between streams (the reader asks for
// another event for what is left: Progress::rewatch). A stream that kept the engine for long
// would delay the answers on the other streams, and a peer waiting for them would fill its send
// queue. The responder's ACKs go out when the turn ends (or the socket is drained), so 4 reads of
// 64 KiB writes cost one ACK and one epoll_wait, where 2 cost two of each.
constexpr int kRxBudget = 4;
// How often the engine looks whether a stream a thread took (QpStream::take) is still read by one:
// the longest an answer waits in the socket for a thread that stopped waiting or polling (the
// engine then reads it, and the completion channel fires), up to twice over. Each check that
// finds the stream still read doubles the next one's delay, up to 8 ms: a check wakes
// the engine, which on a machine with no idle core preempts a thread that polls (1000 checks a
// second put a busy-polling write+flush's p99 at 2.5x its p50 on 2 cores).
constexpr auto kParkCheck = std::chrono::milliseconds(1);
constexpr unsigned kParkCheckMaxShift = 3;  // 8 ms
// Adds h's next park check, `shift` doublings of kParkCheck away, unless one is scheduled
// already (due: its tick; 0: none), so a queue pair has one such timer at a time, whoever takes
// a stream or finds one still taken.
inline void schedule_park_check(std::atomic<Clock::rep> &due, Engine &engine,
                                std::weak_ptr<Handler> h, unsigned shift = 0) {
    Clock::rep none = 0;
    Clock::time_point at = Clock::now() + kParkCheck * (1 << shift);
    if (due.compare_exchange_strong(none, at.time_since_epoch().count()))
        engine.add_timer(at, std::move(h));
}
// How long a deleted connection waits for the peer to take our Disconnect and close its end.
constexpr auto kLingerTimeout = std::chrono::seconds(2);
// How long the answer stream may stay open once the peer ended its request stream: both end
// together when its process ends or it loses the connection, so this bounds only a broken peer.
constexpr auto kLastAnswersWait = std::chrono::seconds(2);
// Answers queued behind a full socket before the responder stops taking requests: a peer that
// does not read its answers stalls only its own connection, never our memory.
constexpr size_t kMaxQueuedAnswers = 64;

// Bytes that go nowhere (skipped payloads) land here; nobody reads them, so one buffer serves
// every thread.
constexpr size_t kDiscardSize = 64 * 1024;
extern char g_discard[kDiscardSize];
// The rest of a write whose source was deregistered mid-send goes out as zeros.
constexpr size_t kZeroSize = 64 * 1024;
extern const char g_zero[kZeroSize];

ibv_wc_status nak_to_status(uint16_t st);

}  // namespace rpma::rc
