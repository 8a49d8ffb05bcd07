// Test hooks that push arbitrary bytes through the tcp provider's real parsers on the calling
// thread (see tests/fuzz, hooks.h): the RC engine's over in-memory streams, the listener's Hello
// reader over a socket pair. Nothing here runs in normal operation.
#include "hooks.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "../support/bare_qp.h"
#include "../support/mem_stream.h"
#include "../support/socket_pair.h"
#include "provider/soft/cq.h"
#include "provider/soft/mr_table.h"
#include "provider/tcp/connector.h"
#include "provider/tcp/hello_reader.h"

namespace rpma::fuzz {

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

// The RC engine over in-memory streams, as tcp::QueuePair runs it once established (or, kind 2,
// once its Hellos are out), with no engine registration: the input is processed on the calling
// thread through the protected interface a transport uses.
class FuzzQp final : public rc::BareQp {
  public:
    using rc::BareQp::BareQp;

    void feed(int kind, MrTable *mrs, Cq *cq, FdQueue<rpma_conn_event> *events, const uint8_t *data,
              size_t size) {
        // In-memory streams, owned by the queue pair: the input, then end of stream, on the main
        // one; what the queue pair answers goes nowhere that matters. Unbounded, so no answer
        // waits.
        auto input = std::make_shared<rc::memio::Channel>();
        input->bytes.assign(data, data + size);
        input->eof = true;
        for (Stream *s : {&main_, &join_}) {
            auto in = s == &main_ ? input : std::make_shared<rc::memio::Channel>();
            auto out = std::make_shared<rc::memio::Channel>();
            in->capacity = out->capacity = SIZE_MAX;
            s->owned_io = std::make_unique<rc::memio::MemStream>(in, out);
            s->io = s->owned_io.get();
            s->connected = true;
            s->rx_on = true;
        }
        bool client = kind != 0;  // the completer and the reply parser are the client's
        (client ? main_ : join_).answers_in = true;
        progress_.handler(shared_from_this());  // as establish_stream does
        if (kind == 2) {
            conn_.begin_connect(Clock::time_point::max());
            conn_.await_reply(Clock::time_point::max());
        } else {
            conn_.accept();
        }
        static char local[4096];
        auto region = mrs->find(0x1000);
        for (int i = 0; i < 4; ++i)
            rq_.post(prov::RecvWr{region, region ? region->addr() + 1024 * i : nullptr, 1024,
                                  static_cast<uint64_t>(i)});
        if (kind == 1) post_requests(region, local);
        // Every kind reads the main stream: the server's requests in, or the client's answers in.
        Stream &in = main_;
        if (kind == 2 && !reply_in(in)) return drain(cq, events);
        // No disconnect reply through the engine thread. Only now: before the posts above it
        // would have flushed them (nothing outstanding), and before the reply it would find no
        // connection.
        conn_.request_disconnect();
        for (int i = 0; i < 64; ++i) {
            std::lock_guard rl(in.rx_mu);
            progress_.read_stream(in);
            if (conn_.state() == Cm::kDone || in.disc_rx || in.stalled()) break;
        }
        drain(cq, events);
    }

  private:
    // The client's Reply through tcp's parser (tcp::Connector::read_reply), then ESTABLISHED
    // as tcp::QueuePair's handshake takes it (a connection on tcp: no offer was made). true:
    // established, and the frames after the Reply follow on the same stream.
    bool reply_in(Stream &in) {
        tcp::Connector connector(nullptr);
        for (int i = 0; i < 4 && conn_.state() == Cm::kAwaitReply; ++i) {
            uint32_t remote_qp = 0;
            std::vector<uint8_t> pdata;
            tcp::Connector::Step st = connector.read_reply(*in.io, &remote_qp, &pdata);
            if (st.kind == tcp::Connector::Step::kWait) continue;
            if (st.kind != tcp::Connector::Step::kDone) {
                fail_connect(st.event);
                break;
            }
            conn_.set_peer(remote_qp, std::move(pdata));
            if (conn_.take_reply()) conn_.post(RPMA_CONN_ESTABLISHED);
        }
        return conn_.state() == Cm::kEstablished;
    }

    // Requests the answers can refer to: seq 1..5.
    void post_requests(const std::shared_ptr<Region> &region, char *local) {
        prov::SendWr w;
        w.len = 16;
        w.local = local;
        w.op = prov::WrOp::kWrite;
        post_send(prov::SendWr(w));
        w.op = prov::WrOp::kRead;
        std::shared_ptr<prov::MemoryRegion> base = region;  // as a post names its source
        w.local_region = region ? &base : nullptr;
        w.local = region ? region->addr() : nullptr;
        post_send(prov::SendWr(w));
        w.op = prov::WrOp::kFlush;
        post_send(prov::SendWr(w));
        w.op = prov::WrOp::kSend;
        w.local = local;
        post_send(prov::SendWr(w));
        w.op = prov::WrOp::kRead;
        w.len = 2048;
        w.local = region ? region->addr() : nullptr;
        post_send(prov::SendWr(w));
    }
};

}  // namespace

void feed_frames(Engine *engine, MrTable *mrs, Cq *cq, FdQueue<rpma_conn_event> *events, int kind,
                 const uint8_t *data, size_t size) {
    rc::QpConfig cfg;
    cfg.sq_size = 64;
    cfg.rq_size = 64;
    cfg.cq = cq;
    cfg.recv_cq = cq;
    auto qp = std::make_shared<FuzzQp>(engine, mrs, cfg, events);
    qp->feed(kind, mrs, cq, events, data, size);
}

int read_hello(const uint8_t *data, size_t size) {
    Fd ours, peer;
    if (!test::socket_pair(&ours, &peer)) return 0;
    push_input(peer.get(), data, size);
    tcp::HelloReader reader;
    tcp::HelloReader::Step st = tcp::HelloReader::Step::kMore;
    for (int i = 0; i < 8 && st == tcp::HelloReader::Step::kMore; ++i) st = reader.read(ours.get());
    return st == tcp::HelloReader::Step::kDone;
}

}  // namespace rpma::fuzz
