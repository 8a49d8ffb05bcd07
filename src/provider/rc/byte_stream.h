// The transport seam under the RC engine: a non-blocking, reliable, ordered byte stream. The
// requester, responder and completer move frames only through it, so they run the same over a
// TCP socket (tcp/socket_stream.h) and over an in-memory pipe in the unit tests. readv, writev,
// shutdown and wait are rc::Stream's (rc/stream.h); the hooks below are today's engine's, and go
// when the rebuilt engine waits through Stream::wait alone (docs/rc-rebuild.md, step (f)).
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <cstdint>

#include "provider/rc/stream.h"

namespace rpma::rc {

class ByteStream : public Stream {
  public:
    // Readiness, for a stream whose fd is not a socket. A socket reports input, space and the
    // peer's end itself; a stream whose fd is only a doorbell (shm) maps what the engine wants
    // onto that (watch), says what a wake-up means once the fd was found readable (woken), and
    // asks for a wake-up before a thread sleeps on the fd (arm: true if input is there already).
    virtual uint32_t watch(uint32_t events) const noexcept { return events; }
    virtual uint32_t woken(uint32_t events) noexcept { return events; }
    virtual bool arm() noexcept { return false; }
    // A reader stopped with the stream still readable, or at EAGAIN: a doorbell stream rings
    // itself if input is left (a socket's reader asks the engine: Progress::rewatch).
    virtual void yielded() noexcept {}
    // Who reads from now on (under the rx lock), for a doorbell stream: what a read that
    // finds no input asks the peer for. kWaiter sleeps next: a doorbell. kPoller (a thread
    // spinning on its CQ) looks again soon but may stop any time: a doorbell only if it falls
    // behind. kSpinner (a spinning engine) looks again until it arms the stream (arm): none.
    enum class Reader { kWaiter, kPoller, kSpinner };
    virtual void reader(Reader) noexcept {}
    // For a spinning engine, without a system call (0 where that takes one): EPOLLIN if input
    // or the end is there, EPOLLOUT if a write that found no room may go on now (taken: the
    // next call says it only if a write is stopped again).
    virtual uint32_t ready() noexcept { return 0; }
    // The reader found no input but expects some within microseconds (the rest of a message,
    // the answer a waiter is about to sleep for): a stream whose peer writes without system
    // calls waits up to limit for it (true: it came) rather than let the reader sleep and be
    // woken. A socket says false at once.
    virtual bool await_input(std::chrono::microseconds /*limit*/) noexcept { return false; }
    // Bytes read and written so far, where that costs no system call (else 0): tells a turn
    // that moved something from one that did not.
    virtual uint64_t progress() const noexcept { return 0; }
    // A doorbell stream rings itself: the engine gets another event for it (a reader left
    // input, or a spinning engine stopped with input there). Nothing for a socket.
    virtual void pass_wake() noexcept {}
    // The error that ended the stream (a socket's SO_ERROR, taken), 0 if none or unknown.
    virtual int take_error() noexcept { return 0; }
    // The fd is a doorbell, not a socket.
    virtual bool doorbell() const noexcept { return false; }
};

}  // namespace rpma::rc
