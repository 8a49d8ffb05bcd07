// One of the RC queue pair's two byte streams (queue_pair.h), as the engine serves it: its
// registration, its reader's flags, and its transmit side (the frames queued in a TxQueue and
// sent under mu, what becomes of a frame whose region vanished, the engine's interest in room).
// Which of the streams carries what, and who reads it, is the queue pair's (Progress).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

#include "common/fd.h"
#include "common/ranked_mutex.h"
#include "provider/rc/byte_stream.h"
#include "provider/rc/tx_queue.h"

namespace rpma {
class Engine;
}  // namespace rpma

namespace rpma::rc {

class Requester;
class Responder;

// The queue pair's lock order (queue_pair.h): QpStream::rx_mu -> the send queue's -> the
// Connection's -> QpStream::mu.
enum LockRank : unsigned { kRxRank, kSqRank, kCmRank, kTxRank };

struct QpStream {
    // engine: where the stream is registered; requester: marks a request whose source vanished.
    QpStream(Engine *e, Requester *r) noexcept : engine(e), requester(r) {}

    Fd fd;                                 // registered with the engine: readable when io has input
    ByteStream *io = nullptr;              // the transport's; what the RC engine reads and writes
    std::unique_ptr<ByteStream> owned_io;  // io, when the queue pair owns it
    uint64_t key = 0;
    bool answers_in = false;  // we send our requests here and read their answers
    // under mu (its reader and flush_tx both set them): what ended the stream, for the log
    const char *why = nullptr;
    bool peer_end = false;             // why: the peer's kernel ended it (its process is gone)
    std::atomic<bool> disc_rx{false};  // the peer's Disconnect came on this stream
    bool connected = false;
    // tx: under mu
    RankedMutex mu{kTxRank};
    TxQueue tx;
    bool want_out = false;
    bool rx_on = false;
    bool wr_shut = false;
    // Why the responder holds the peer's requests back (its runner sets it, under mu). kAnswers:
    // the staged request waits for our queued answers to leave, and the drain that sees them
    // gone claims it (take_drained: kResume, then a resume); kResume: it waits for a resume (a
    // receive posted, the completer caught up, the drain's claim), whose pass re-runs it.
    enum class Stall : uint8_t { kNone, kAnswers, kResume };
    Stall stall = Stall::kNone;
    std::atomic<bool> nak_queued{false};  // a read answer became a NAK: responder in error
    RankedMutex rx_mu{kRxRank};           // whoever reads the stream holds it, a driving waiter too
    // The engine saw the peer's end (RDHUP, HUP, ERR), which an edge-triggered registration
    // shows once: the next read that stops short of it comes back for it (read_stream).
    std::atomic<bool> end_seen{false};
    // Who watches a socket stream's input. kEngine: the engine (EPOLLIN in its mask). A
    // thread that waits or polls on it takes it (take; the request stream only where that
    // thread serves requests), so that the engine is not woken beside that thread for
    // every message: kThread, a thread read it since the engine's last check; kThreadIdle,
    // none did, and the next check gives it back (Progress::on_timer, kParkCheck and later).
    enum class Sleeper : uint8_t { kEngine, kThread, kThreadIdle };
    std::atomic<Sleeper> sleeper{Sleeper::kEngine};
    Engine *const engine;
    Requester *const requester;

    // A thread about to read the stream takes it; true: it was the engine's, and the caller
    // takes it off the engine's mask (rewatch). A doorbell stream only by a waiter
    // (doorbells): a poller's late doorbell (ShmStream) keeps the engine from waking.
    bool take(bool doorbells = false) noexcept {
        return (doorbells || !io->doorbell()) &&
               sleeper.exchange(Sleeper::kThread) == Sleeper::kEngine;
    }

    bool readable() {  // a read could take input now (rx on, not stalled)
        std::lock_guard lk(mu);
        return rx_on && !stalled() && !disc_rx;
    }

    // mu not held: what ended the stream (why, else otherwise) and whether the peer's kernel did
    std::pair<const char *, bool> end_cause(const char *otherwise) {
        std::lock_guard lk(mu);
        return {why ? why : otherwise, why && peer_end};
    }

    // mu not held: the registration goes (key 0 from now on), on the engine thread or in close
    // (Engine::remove waits for the engine).
    void leave_engine();

    // The rest under mu.
    void update_mask();                // the engine's registration follows the state again
    bool flush_tx();                   // false on a broken stream
    bool region_vanished(TxItem &it);  // false: the stream must end
    void append_ack(uint64_t seq);     // the engine thread's
    // Before a graceful close: frames the peer will never use are dropped, and answers (the
    // answer stream's responder, else nullptr) end with the ACK the peer counts on.
    void settle_for_close(Responder *answers);
    bool answers_block(bool modifies) const noexcept;
    bool stalled() const noexcept { return stall != Stall::kNone; }
    bool take_drained() noexcept;  // mu held: a kAnswers stall may go on (now kResume)
};

}  // namespace rpma::rc
