// Test hooks that push arbitrary bytes through the tcp provider's real parsers on the calling
// thread (see tests/fuzz): the RC engine's over in-memory streams, the listener's over a socket
// pair. Nothing here runs in normal operation.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "../support/mem_stream.h"
#include "provider/soft/cq.h"
#include "provider/soft/mr_table.h"
#include "provider/tcp/listener.h"
#include "provider/tcp/queue_pair.h"

namespace rpma::tcp {

namespace {

// Writes what fits and ends the peer's output, so the parser meets EOF after the input.
void push_input(int fd, const uint8_t *data, size_t size) {
    while (size > 0) {
        ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0) break;
        data += n;
        size -= static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
}

void drain(Cq *cq, FdQueue<rpma_conn_event> *events) {
    ibv_wc wc[16];
    int got = 0;
    while (cq->get_wc(16, wc, &got) == 0) {
    }
    events->drain();
}

}  // namespace

void QueuePair::fuzz_feed(Engine *engine, MrTable *mrs, Cq *cq, FdQueue<rpma_conn_event> *events,
                          int kind, const uint8_t *data, size_t size) {
    QpConfig cfg;
    cfg.sq_size = 64;
    cfg.rq_size = 64;
    cfg.cq = cq;
    cfg.recv_cq = cq;
    auto qp = create(engine, mrs, cfg, events);
    // In-memory streams, owned by the queue pair: the input, then end of stream, on the main
    // one; what the queue pair answers goes nowhere that matters. Unbounded, so no answer waits.
    auto input = std::make_shared<rc::memio::Channel>();
    input->bytes.assign(data, data + size);
    input->eof = true;
    for (Stream *s : {&qp->main_, &qp->join_}) {
        auto in = s == &qp->main_ ? input : std::make_shared<rc::memio::Channel>();
        auto out = std::make_shared<rc::memio::Channel>();
        in->capacity = out->capacity = SIZE_MAX;
        s->owned_io = std::make_unique<rc::memio::MemStream>(in, out);
        s->io = s->owned_io.get();
        s->connected = true;
        s->rx_on = true;
    }
    bool client = kind != 0;  // the completer and the reply parser are the client's
    (client ? qp->main_ : qp->join_).answers_in = true;
    qp->progress_.handler(qp);  // as establish_stream does
    if (kind == 2) {
        qp->conn_.begin_connect(Clock::time_point::max());
        qp->conn_.await_reply(Clock::time_point::max());
    } else {
        qp->conn_.accept();
    }
    static char local[4096];
    auto region = mrs->find(0x1000);
    for (int i = 0; i < 4; ++i)
        qp->rq_.post(prov::RecvWr{region, region ? region->addr() + 1024 * i : nullptr, 1024,
                                  static_cast<uint64_t>(i)});
    if (kind == 1) post_requests(*qp, region, local);
    // Every kind reads the main stream: the server's requests in, or the client's answers in.
    Stream &in = qp->main_;
    if (kind == 2) {
        for (int i = 0; i < 4 && qp->conn_.state() == Cm::kAwaitReply; ++i) qp->handshake_in();
        if (qp->conn_.state() != Cm::kEstablished) return drain(cq, events);
    }
    // No disconnect reply through the engine thread. Only now: before the posts above it would
    // have flushed them (nothing outstanding), and before the reply it would find no connection.
    qp->conn_.request_disconnect();
    for (int i = 0; i < 64; ++i) {
        std::lock_guard rl(in.rx_mu);
        qp->progress_.read_stream(in);
        if (qp->conn_.state() == Cm::kDone || in.disc_rx || in.stalled()) break;
    }
    drain(cq, events);
}

void QueuePair::post_requests(QueuePair &qp, const std::shared_ptr<Region> &region, char *local) {
    // requests the answers can refer to: seq 1..5
    prov::SendWr w;
    w.len = 16;
    w.local = local;
    w.op = prov::WrOp::kWrite;
    qp.post_send(prov::SendWr(w));
    w.op = prov::WrOp::kRead;
    std::shared_ptr<prov::MemoryRegion> base = region;  // as a post names its source
    w.local_region = region ? &base : nullptr;
    w.local = region ? region->addr() : nullptr;
    qp.post_send(prov::SendWr(w));
    w.op = prov::WrOp::kFlush;
    qp.post_send(prov::SendWr(w));
    w.op = prov::WrOp::kSend;
    w.local = local;
    qp.post_send(prov::SendWr(w));
    w.op = prov::WrOp::kRead;
    w.len = 2048;
    w.local = region ? region->addr() : nullptr;
    qp.post_send(prov::SendWr(w));
}

int Listener::fuzz_hello(Engine *engine, const uint8_t *data, size_t size) {
    std::shared_ptr<Listener> l(new Listener(engine));
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return 0;
    Fd peer(sv[1]);
    int fd = sv[0];
    Pending p;
    p.fd.reset(fd);
    p.deadline = Clock::now();
    l->pending_.emplace(fd, std::move(p));
    push_input(peer.get(), data, size);
    for (int i = 0; i < 8 && l->pending_.count(fd); ++i) l->read_hello(l->pending_.at(fd));
    int queued = static_cast<int>(l->requests_.drain().size());
    l->on_timer();
    return queued;
}

}  // namespace rpma::tcp
