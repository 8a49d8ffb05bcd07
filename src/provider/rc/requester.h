// The requester (after rxe_req): a posted work request becomes a send queue entry and the frame
// that carries it, on the application's thread; and the source-fault marks of requests whose
// region was deregistered before their frame left.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "provider/provider.h"
#include "provider/rc/completer.h"
#include "provider/rc/send_queue.h"
#include "provider/rc/tx_queue.h"

namespace rpma::rc {

class Requester {
  public:
    Requester(SendQueue &sq, Completer &completer, uint32_t sq_size) noexcept
        : sq_(sq), completer_(completer), sq_size_(sq_size) {}

    // sq_mu held: wr into the send queue, and frame set to the frame that carries it, which the
    // queue pair queues before it releases sq_mu (frames leave in sequence order). open: the
    // connection takes requests (else wr is flushed, as verbs does in the error state, and no
    // frame comes); ack: the peer's requests we executed, carried on the frame.
    // RPMA_E_PROVIDER when the send queue is full.
    int post(prov::SendWr wr, bool open, uint64_t ack, std::optional<TxItem> &frame);

    // The request stream's tx lock held: a frame's source was deregistered (started: part of it
    // left; down: why the stream already ended, or nullptr). Marks the request to complete with
    // LOC_PROT_ERR and rewrites the frame; returns why the stream must end instead, or nullptr.
    const char *source_vanished(TxItem &it, bool started, const char *down);
    // Any thread: a mark may be waiting (take_fault then needs the tx lock).
    bool has_faults() const noexcept { return faults_.load(std::memory_order_acquire) != 0; }
    // The request stream's tx lock held: seq was marked; the mark goes.
    bool take_fault(uint64_t seq);

  private:
    SendQueue &sq_;         // under sq_mu
    Completer &completer_;  // under sq_mu
    uint32_t sq_size_;
    uint32_t unsignaled_run_ = 0;  // under sq_mu: unsignaled WRs posted since the last ACK request
    std::vector<uint64_t> src_faults_;  // under the request stream's tx lock
    std::atomic<uint32_t> faults_{0};   // entries in src_faults_
};

}  // namespace rpma::rc
