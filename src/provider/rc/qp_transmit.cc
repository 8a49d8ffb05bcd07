// The transmit side of both streams: posts handed to the requester (requester.h) and
// receives, the responder's answers queued on its stream, and its wait for them to leave. The
// frames' queue and their send are the stream's (qp_stream.h).
#include <sys/socket.h>

#include "common/log.h"
#include "common/sanitizer.h"
#include "provider/rc/qp_internal.h"
#include "provider/rc/queue_pair.h"

namespace rpma::rc {

int QueuePair::post_send(prov::SendWr &&wr) {
    // In a forked child the sockets are the parent's: a frame from here would corrupt its stream.
    if (int ret = engine_->check_process("the connection")) return ret;
    std::unique_lock lk(sq_mu_);
    Connection::Posts posts = conn_.posts();
    if (posts == Connection::Posts::kNotYet) {
        RPMA_LOG_ERROR("the connection is not established yet");
        return RPMA_E_PROVIDER;
    }
    bool open = posts == Connection::Posts::kOpen;
    std::optional<TxItem> item;
    int ret = requester_.post(std::move(wr), open, responder_.executed(), item);
    if (!item) return ret;
    Stream &s = progress_.req();
    bool run;
    {
        std::lock_guard tlk(s.mu);
        // Frames already queued mean the socket is full (EPOLLOUT schedules the requester), or
        // they wait for an answer as below, or the post that queued them has yet to schedule
        // the requester: this one joins them (and goes out in the same sendmsg).
        run = s.tx.empty();
        // Many requests in flight and one whose answer will come has left (the send queue holds
        // a contiguous range of sequence numbers): the thread that reads that answer completes
        // it under sq_mu_, after this push, and then runs the requester (finish_read), which
        // sends this frame with every other posted by then in one sendmsg. Exact: whoever
        // reads that answer runs the requester after it, so the frame never waits longer.
        if (run && sq_.outstanding() >= kCorkDepth && sq_.front().seq <= s.tx.answer_due())
            run = false;
        s.tx.push(std::move(*item));
    }
    // Queued in sequence order (under sq_mu_); the send needs only s.mu, so the completer can
    // take sq_mu_ for the answers that arrive meanwhile instead of sleeping.
    lk.unlock();
    // Idle: this thread sends now. Running elsewhere: armed, and that runner's next pass sends
    // this frame, never waiting for an answer. A broken stream was shut down (flush_tx): the
    // engine sees its end and reports the loss.
    if (run) progress_.run_requester();
    return 0;
}

int QueuePair::post_recv(prov::RecvWr &&r) {
    if (int ret = engine_->check_process("the connection")) return ret;
    if (cfg_.srq) {
        RPMA_LOG_ERROR("the connection receives through a shared RQ; use rpma_srq_recv");
        return RPMA_E_PROVIDER;
    }
    bool err;
    {
        std::lock_guard lk(sq_mu_);
        err = completer_.error();
    }
    if (err) {
        responder_.flush_recv(r);
        return 0;
    }
    return rq_.post(std::move(r));
}

bool QueuePair::source_faulted(uint64_t seq) {
    // Under TSan the lock is taken for every completion: the request's frame left under it, and
    // the order from that send to this completion runs through the peer's answer on the socket,
    // which TSan cannot see. Without it, an owner that reuses the buffer once its completion
    // comes is reported against the sendmsg that read it (another thread's).
    if (!kThreadSanitizer && !requester_.has_faults()) return false;
    std::lock_guard lk(progress_.req().mu);
    return requester_.take_fault(seq);
}

bool QueuePair::queue_answer(const FrameHeader &h, const char *data, std::shared_ptr<Region> region,
                             bool batch) {
    Stream &s = progress_.resp();
    std::lock_guard lk(s.mu);
    responder_.answered(h.aux);
    s.tx.push(TxItem{h, data, h.length, std::move(region)});
    return (batch && s.tx.size() < kAnswersPerSend) || s.flush_tx();
}

QueuePair::Step QueuePair::wait_for_answers(bool modifies) {
    Stream &s = progress_.resp();
    {
        std::lock_guard lk(s.mu);  // the engine may be sending answers (EPOLLOUT)
        if (!s.answers_block(modifies)) return Step::kContinue;
    }
    if (!answer_now()) return Step::kFatal;
    std::lock_guard lk(s.mu);
    if (!s.answers_block(modifies)) return Step::kContinue;
    // Flow control instead of copies: the request stays staged until EPOLLOUT drains the
    // answers (on_events), and meanwhile nothing more is read from this peer.
    s.stall = Stream::Stall::kAnswers;
    if (!s.want_out) {
        s.want_out = true;
        s.update_mask();
    }
    return Step::kStall;
}

}  // namespace rpma::rc
