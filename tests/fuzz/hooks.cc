// Test hooks that push arbitrary bytes through the tcp provider's real parsers on the calling
// thread (see tests/fuzz). Nothing here runs in normal operation.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

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

}  // namespace

void QueuePair::fuzz_feed(Engine *engine, MrTable *mrs, Cq *cq, int kind, const uint8_t *data,
                          size_t size) {
    FdQueue<rpma_conn_event> events;
    QpConfig cfg;
    cfg.sq_size = 64;
    cfg.rq_size = 64;
    cfg.cq = cq;
    cfg.recv_cq = cq;
    auto qp = create(engine, mrs, cfg, &events);
    int a[2], b[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, a) != 0) return;
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, b) != 0) {
        ::close(a[0]);
        ::close(a[1]);
        return;
    }
    Fd peer_main(a[1]), peer_join(b[1]);
    bool client = kind != 0;  // the completer and the reply parser are the client's
    qp->is_client_ = client;
    (client ? qp->main_ : qp->join_).answers_in = true;
    qp->main_.fd.reset(a[0]);
    qp->join_.fd.reset(b[0]);
    for (Stream *s : {&qp->main_, &qp->join_}) {
        s->buf.reset(new char[16 * 1024]);
        s->connected = true;
        s->rx_on = true;
    }
    qp->cm_ = kind == 2 ? Cm::kAwaitReply : Cm::kEstablished;
    static char local[4096];
    auto region = mrs->find(0x1000);
    for (int i = 0; i < 4; ++i)
        qp->rq_.post(prov::RecvWr{region, region ? region->addr() + 1024 * i : nullptr, 1024,
                                  static_cast<uint64_t>(i)});
    if (kind == 1) {
        // requests the answers can refer to: seq 1..5
        prov::SendWr w;
        w.len = 16;
        w.local = local;
        w.op = prov::WrOp::kWrite;
        qp->post_send(w);
        w.op = prov::WrOp::kRead;
        w.local_region = region;
        w.local = region ? region->addr() : nullptr;
        qp->post_send(w);
        w.op = prov::WrOp::kFlush;
        qp->post_send(w);
        w.op = prov::WrOp::kSend;
        w.local = local;
        qp->post_send(w);
        w.op = prov::WrOp::kRead;
        w.len = 2048;
        w.local = region ? region->addr() : nullptr;
        qp->post_send(w);
    }
    // Every kind reads the main stream: the server's requests in, or the client's answers in.
    // Only now: set before the posts above, it would have flushed them (nothing outstanding).
    qp->disc_sent_ = true;  // no disconnect reply through the engine thread
    Stream &in = qp->main_;
    push_input(peer_main.get(), data, size);
    if (kind == 1) {
        // answers arrive on the client's main stream
        for (int i = 0; i < 64; ++i) {
            std::lock_guard rl(qp->main_.rx_mu);
            qp->read_stream(qp->main_);
            if (qp->cm_ == Cm::kDone || qp->main_.disc_rx) break;
        }
    } else if (kind == 2) {
        for (int i = 0; i < 4 && qp->cm_ == Cm::kAwaitReply; ++i) qp->handshake_in();
        if (qp->cm_ == Cm::kEstablished) {
            std::lock_guard rl(qp->main_.rx_mu);
            qp->read_stream(qp->main_);
        }
    } else {
        for (int i = 0; i < 64; ++i) {
            std::lock_guard rl(in.rx_mu);
            qp->read_stream(in);
            if (qp->cm_ == Cm::kDone || in.disc_rx || in.stalled) break;
        }
    }
    ibv_wc wc[16];
    int got = 0;
    while (cq->get_wc(16, wc, &got) == 0) {
    }
    events.drain();
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
