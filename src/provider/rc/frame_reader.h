// The receive side of one stream: frames are staged, many per recv, and a payload goes straight
// into its target (a large one with one readv, the next header behind it). Whoever owns the
// stream's input (the completer for answers, the responder for requests) reads through one and
// says, per header, where its payload goes; the reader says when it is placed.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>

#include "provider/rc/byte_stream.h"
#include "provider/rc/frame.h"
#include "provider/rc/qp_internal.h"
#include "provider/soft/region.h"

namespace rpma::rc {

// How a read, or one frame in it, ends: go on; no input (the stream brings the reader back); the
// frame must wait and stays staged; the stream is broken (end() says why); or its input ended
// in order (a Disconnect).
enum class Step { kContinue, kBlock, kStall, kFatal, kStop };

// What a payload is for; kDiscard: nothing, its bytes are dropped.
enum class Payload { kNone, kWrite, kWriteImm, kSend, kReadResp, kDiscard };

// Why a read ended with Step::kFatal. A protocol error the handler found names itself; an end
// the stream reported (protocol false) is its first cause only if nothing else failed before.
struct ReadEnd {
    const char *why = nullptr;
    bool peer_end = false;  // the peer's kernel ended the stream (its process is gone)
    bool protocol = false;
    bool eof = false;  // the stream ended in order (not reset, not failed)
};

class FrameReader {
  public:
    FrameReader() : buf_(new char[kStagingSize]) {}

    // Reads frames from io until it blocks, a frame stalls or fails, or the input ends (stop
    // set, or a frame sets it). The handler h has, called on this thread:
    //   Step header(const FrameHeader &): a frame; expect() or discard() its payload, if any;
    //   void placed(Payload, bool failed, uint32_t len): a payload is complete (failed: its
    //     target vanished and not all of it was placed);
    //   bool before_recv(): about to make a system call; false ends the read (kFatal).
    template <class H>
    Step read(ByteStream &io, const std::atomic<bool> &stop, H &h) {
        int budget = kRxBudget;
        drained_ = false;
        Step st = Step::kContinue;
        while (st == Step::kContinue) {
            if (stop) return Step::kStop;
            if (in_payload_) {
                bool done = false;
                st = payload(io, budget, done);
                if (done) placed(h);
            } else if (tail_ - head_ >= kHeaderSize) {
                st = take_header(h);
            } else if (budget-- <= 0) {
                // Yield only with nothing complete staged: what is left is in the stream
                // (drained() says whether anything is).
                st = Step::kBlock;
            } else if (!h.before_recv()) {
                st = Step::kFatal;
            } else {
                st = fill(io, budget);
            }
        }
        return st;
    }

    // From a handler's header(): the payload goes to dst (nullptr: dropped), inside region
    // (held while bytes go in; nullptr: memory the reader may always write).
    void expect(Payload p, char *dst, std::shared_ptr<Region> region, uint64_t len,
                bool failed = false) noexcept {
        payload_ = p;
        dst_ = dst;
        dst_region_ = std::move(region);
        failed_ = failed;
        remaining_ = payload_len_ = len;
    }
    void discard(uint64_t len) noexcept { expect(Payload::kDiscard, nullptr, nullptr, len); }
    // From a handler: the frame breaks the protocol; the read ends with kFatal.
    void protocol_error(const char *why) noexcept { end_ = {why, false, true}; }
    const ReadEnd &end() const noexcept { return end_; }
    // After a read that ended in kBlock: its last look at the stream took all there was (it
    // found EAGAIN, or got less than it asked for), so new input brings a new edge. False: it
    // stopped on its budget and input may be left, which no edge announces again.
    bool drained() const noexcept { return drained_; }

  private:
    template <class H>
    Step take_header(H &h) {
        FrameHeader fh;
        std::memcpy(&fh, buf_.get() + head_, kHeaderSize);
        Step st = h.header(fh);
        if (st == Step::kStall) return st;  // the header stays staged for the retry
        head_ += kHeaderSize;
        if (st == Step::kContinue && payload_ != Payload::kNone) {
            in_payload_ = true;
            if (remaining_ == 0) placed(h);
        } else {
            payload_len_ = 0;  // a frame without payload: small frames follow, stage them
        }
        return st;
    }
    // The payload is complete: back to headers, and the handler hears of it.
    template <class H>
    void placed(H &h) {
        Payload p = payload_;
        bool failed = failed_;
        auto len = static_cast<uint32_t>(payload_len_);
        payload_ = Payload::kNone;
        in_payload_ = false;
        dst_ = nullptr;
        dst_region_.reset();
        failed_ = false;
        h.placed(p, failed, len);
    }
    Step fill(ByteStream &io, int &budget);                 // one read into the staging buffer
    Step payload(ByteStream &io, int &budget, bool &done);  // spends budget only on reads
    void io_end(ssize_t n, int err, const char *eof_why) noexcept;

    std::unique_ptr<char[]> buf_;  // kStagingSize
    size_t head_ = 0, tail_ = 0;
    bool in_payload_ = false;
    Payload payload_ = Payload::kNone;
    char *dst_ = nullptr;
    uint64_t remaining_ = 0;
    uint64_t payload_len_ = 0;
    std::shared_ptr<Region> dst_region_;
    bool failed_ = false;  // the target vanished: the rest is dropped and the operation fails
    bool drained_ = false;
    ReadEnd end_;
};

}  // namespace rpma::rc
