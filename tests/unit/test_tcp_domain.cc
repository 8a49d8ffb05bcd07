// The tcp provider through the provider interface (prov::Device, prov::Domain, prov::Listener):
// limits, memory registration, CQs, channels and SRQs, listening (with the shared-memory offer
// socket beside it, and out of descriptors), and a connection request that is rejected or
// accepted. Real sockets on 127.0.0.1, ports 25700-25799; every wait is bounded.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <librpma.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/socket_pair.h"
#include "common/fd.h"
#include "common/fd_queue.h"
#include "provider/provider.h"
#include "provider/rc/progress.h"
#include "provider/shm/link.h"
#include "provider/soft/cq.h"
#include "provider/soft/region.h"
#include "provider/tcp/domain.h"
#include "provider/tcp/listener.h"
#include "provider/tcp/upgrade.h"
#include "provider/tcp/wire.h"
#include "provider_env.h"
#include "socket_spy.h"
#include "thread_state.h"

using namespace rpma;

namespace {

constexpr int kWaitMs = 10000;

bool Readable(int fd, int timeout_ms = kWaitMs) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

// next() blocks on a blocking fd (rpma_ep_next_conn_req); the tests never want that.
void NonBlocking(int fd) {
    set_nonblocking(fd, true);
    ASSERT_TRUE(nonblocking(fd));
}

std::string Str(const std::vector<uint8_t> &v) {
    return std::string(v.begin(), v.end());
}

// What a side receives for `sent`, as RDMA CM delivers it: the bytes, then zeros up to `size`.
std::string Delivered(const std::string &sent, size_t size) {
    std::string s = sent;
    s.resize(size, '\0');
    return s;
}

using test::ProviderEnv;

class TcpDomainTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ibv_context *ctx = nullptr;
        ASSERT_EQ(prov::lookup_device("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx), 0);
        prov::Device *dev = prov::device_from_context(ctx);
        ASSERT_NE(dev, nullptr);
        ASSERT_EQ(dev->open_domain(&dom_), 0);
        ASSERT_NE(dom_, nullptr);
    }

    void TearDown() override {
        if (l_) l_->close();  // rejects what was not taken
    }

    // One side of a connection: a channel, one CQ for everything, the event queue, the QP.
    struct Side {
        std::unique_ptr<prov::CompletionChannel> ch;
        std::unique_ptr<prov::CompletionQueue> cq;
        FdQueue<rpma_conn_event> events;
        std::shared_ptr<prov::QueuePair> qp;
        prov::QpAttr attr() {
            prov::QpAttr a;
            a.sq_size = 4;
            a.rq_size = 4;
            a.cq = cq.get();
            a.recv_cq = cq.get();
            a.events = &events;
            return a;
        }
    };
    void MakeSide(Side &s) {
        ASSERT_EQ(dom_->create_channel(&s.ch), 0);
        ASSERT_EQ(dom_->create_cq(s.ch.get(), false, 10, &s.cq), 0);
        ASSERT_NE(s.cq, nullptr);
        ASSERT_TRUE(s.events.valid());
    }
    // Listens on port, connects c to it with private data "hello", and takes the request.
    void Request(const char *port, Side &c, std::unique_ptr<prov::IncomingRequest> *req) {
        ASSERT_EQ(dom_->listen("127.0.0.1", port, &l_), 0);
        ASSERT_NO_FATAL_FAILURE(RequestTo(port, c, req));
    }
    // The same on a listener l_ that listens already.
    void RequestTo(const char *port, Side &c, std::unique_ptr<prov::IncomingRequest> *req) {
        ASSERT_NO_FATAL_FAILURE(NonBlocking(l_->fd()));
        ASSERT_NO_FATAL_FAILURE(MakeSide(c));
        ASSERT_EQ(dom_->create_qp("127.0.0.1", port, c.attr(), &c.qp), 0);
        ASSERT_EQ(c.qp->connect("hello", 5), 0);
        ASSERT_TRUE(Readable(l_->fd())) << "no request within " << kWaitMs << " ms";
        *req = l_->next();
        ASSERT_NE(*req, nullptr);
        EXPECT_EQ(Str((*req)->private_data()), Delivered("hello", 56));
    }
    // Makes s and accepts req on it with pdata.
    void Accept(Side &s, std::unique_ptr<prov::IncomingRequest> req, const char *pdata,
                uint8_t len) {
        ASSERT_NO_FATAL_FAILURE(MakeSide(s));
        ASSERT_EQ(dom_->create_qp(s.attr(), *req, &s.qp), 0);
        ASSERT_EQ(s.qp->accept(std::move(req), pdata, len), 0);
    }
    static rpma_conn_event NextEvent(Side &s) {
        if (!Readable(s.events.fd())) return RPMA_CONN_UNDEFINED;
        auto e = s.events.try_pop();
        return e ? *e : RPMA_CONN_UNDEFINED;
    }

    std::unique_ptr<prov::Domain> dom_;
    std::shared_ptr<prov::Listener> l_;
};

TEST_F(TcpDomainTest, Caps) {
    const prov::Caps &c = dom_->caps();
    EXPECT_EQ(c.max_op_length, 1u << 30);
    EXPECT_EQ(c.connect_pdata_max, 56);
    EXPECT_EQ(c.accept_pdata_max, 196);
    EXPECT_EQ(dom_->check_process("the test"), 0);
}

TEST_F(TcpDomainTest, RegisterAndDeregister) {
    static char buf[4096];
    std::shared_ptr<prov::MemoryRegion> a, b;
    ASSERT_EQ(dom_->register_memory(buf, sizeof(buf), RPMA_MR_USAGE_READ_SRC, &a), 0);
    ASSERT_EQ(dom_->register_memory(buf + 100, 100, RPMA_MR_USAGE_WRITE_DST, &b), 0);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(a->addr(), buf);
    EXPECT_EQ(a->size(), sizeof(buf));
    EXPECT_EQ(a->usage(), RPMA_MR_USAGE_READ_SRC);
    EXPECT_EQ(b->addr(), buf + 100);
    EXPECT_EQ(b->usage(), RPMA_MR_USAGE_WRITE_DST);
    EXPECT_NE(a->rkey(), 0u);
    EXPECT_NE(a->rkey(), b->rkey());

    // the domain's regions are soft Regions: deregistration kills them
    auto *ra = static_cast<Region *>(a.get());
    EXPECT_TRUE(RegionUse(ra).ok());
    dom_->deregister(a);
    EXPECT_FALSE(RegionUse(ra).ok());
    EXPECT_TRUE(RegionUse(static_cast<Region *>(b.get())).ok());
    dom_->deregister(b);
}

TEST_F(TcpDomainTest, ChannelCqAndSrq) {
    std::unique_ptr<prov::CompletionChannel> ch;
    ASSERT_EQ(dom_->create_channel(&ch), 0);
    ASSERT_NE(ch, nullptr);
    EXPECT_GE(ch->fd(), 0);
    std::unique_ptr<prov::CompletionQueue> cq;
    ASSERT_EQ(dom_->create_cq(ch.get(), false, 10, &cq), 0);
    ASSERT_NE(cq, nullptr);
    EXPECT_EQ(cq->fd(), ch->fd());
    EXPECT_TRUE(cq->empty());
    ibv_wc wc;
    int got = 0;
    EXPECT_EQ(cq->get_wc(1, &wc, &got), RPMA_E_NO_COMPLETION);
    std::unique_ptr<prov::CompletionQueue> shared;
    ASSERT_EQ(dom_->create_cq(ch.get(), true, 10, &shared), 0);
    EXPECT_EQ(shared->wait(), RPMA_E_SHARED_CHANNEL);

    std::unique_ptr<prov::SharedRecvQueue> srq;
    ASSERT_EQ(dom_->create_srq(2, &srq), 0);
    ASSERT_NE(srq, nullptr);
    prov::RecvWr r;  // a 0-byte receive
    EXPECT_EQ(srq->post(r), 0);
    EXPECT_EQ(srq->post(r), 0);
    EXPECT_EQ(srq->post(r), RPMA_E_PROVIDER);
}

TEST_F(TcpDomainTest, ACqOrAnSrqOfNoEntriesIsRefusedAsVerbsRefuseIt) {
    std::unique_ptr<prov::CompletionChannel> ch;
    ASSERT_EQ(dom_->create_channel(&ch), 0);
    std::unique_ptr<prov::CompletionQueue> cq;
    EXPECT_EQ(dom_->create_cq(ch.get(), false, 0, &cq), RPMA_E_PROVIDER);
    EXPECT_EQ(cq, nullptr);
    EXPECT_EQ(dom_->create_cq(ch.get(), false, 1, &cq), 0);
    EXPECT_NE(cq, nullptr);
    std::unique_ptr<prov::SharedRecvQueue> srq;  // and an SRQ of none, as ibv_create_srq
    EXPECT_EQ(dom_->create_srq(0, &srq), RPMA_E_PROVIDER);
    EXPECT_EQ(srq, nullptr);
}

TEST_F(TcpDomainTest, ListenAndBadAddresses) {
    std::shared_ptr<prov::Listener> l;
    ASSERT_EQ(dom_->listen("127.0.0.1", "25700", &l), 0);
    ASSERT_NE(l, nullptr);
    EXPECT_GE(l->fd(), 0);
    EXPECT_FALSE(Readable(l->fd(), 0));
    ASSERT_NO_FATAL_FAILURE(NonBlocking(l->fd()));
    EXPECT_EQ(l->next(), nullptr);  // nothing waits

    std::shared_ptr<prov::Listener> other;
    EXPECT_EQ(dom_->listen("127.0.0.1", "25700", &other), RPMA_E_PROVIDER);  // port taken
    // TEST-NET-1: a well-formed address that is no local interface
    EXPECT_EQ(dom_->listen("192.0.2.1", "25701", &other), RPMA_E_PROVIDER);
    EXPECT_EQ(dom_->listen("127.0.0.1", "no-such-service", &other), RPMA_E_PROVIDER);
    EXPECT_EQ(other, nullptr);
    l->close();
}

TEST_F(TcpDomainTest, CreateQpUnresolvable) {
    Side c;
    ASSERT_NO_FATAL_FAILURE(MakeSide(c));
    // a service name no resolver knows fails without a DNS round trip
    EXPECT_EQ(dom_->create_qp("127.0.0.1", "no-such-service", c.attr(), &c.qp), RPMA_E_PROVIDER);
    EXPECT_EQ(c.qp, nullptr);
}

// RDMA CM resolves no route to 0.0.0.0 or ::, though the kernel would take either for this host.
TEST_F(TcpDomainTest, CreateQpToAWildcardAddressFails) {
    for (const char *any : {"0.0.0.0", "::"}) {
        Side c;
        ASSERT_NO_FATAL_FAILURE(MakeSide(c));
        EXPECT_EQ(dom_->create_qp(any, "25715", c.attr(), &c.qp), RPMA_E_PROVIDER) << any;
        EXPECT_EQ(c.qp, nullptr);
    }
}

TEST_F(TcpDomainTest, RequestRejectedWhenDroppedUnaccepted) {
    Side c;
    std::unique_ptr<prov::IncomingRequest> req;
    ASSERT_NO_FATAL_FAILURE(Request("25710", c, &req));
    EXPECT_EQ(l_->next(), nullptr);  // one request only
    req.reset();
    EXPECT_EQ(NextEvent(c), RPMA_CONN_REJECTED);
    c.qp->close();
}

// The end of a socket's stream has reached it (bounded wait).
bool Ended(int fd, int timeout_ms = kWaitMs) {
    pollfd p{fd, POLLRDHUP, 0};
    return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLRDHUP);
}

TEST(TcpIncomingConn, TheClientIsGoneOnceEitherStreamEnds) {
    for (bool main : {true, false}) {
        tcp::IncomingConn in;
        Fd client_main, client_join;
        ASSERT_TRUE(test::socket_pair(&in.main, &client_main));
        ASSERT_TRUE(test::socket_pair(&in.join, &client_join));
        ASSERT_EQ(::send(client_main.get(), "x", 1, MSG_NOSIGNAL), 1);  // bytes alone: still there
        EXPECT_FALSE(in.client_gone());
        (main ? client_main : client_join).reset();
        ASSERT_TRUE(Ended((main ? in.main : in.join).get()));
        EXPECT_TRUE(in.client_gone()) << (main ? "main" : "join");
    }
}

// As rdma_accept fails once the client's CM has given up, and the request is gone with it.
TEST_F(TcpDomainTest, AcceptingARequestWhoseClientHasGoneFails) {
    Side c, s;
    std::unique_ptr<prov::IncomingRequest> req;
    ASSERT_NO_FATAL_FAILURE(Request("25713", c, &req));
    c.qp->close();
    c.qp.reset();
    ASSERT_TRUE(Ended(static_cast<tcp::Incoming *>(req.get())->conn.main.get()));
    ASSERT_NO_FATAL_FAILURE(MakeSide(s));
    ASSERT_EQ(dom_->create_qp(s.attr(), *req, &s.qp), 0);
    EXPECT_EQ(s.qp->accept(std::move(req), "x", 1), RPMA_E_PROVIDER);
    EXPECT_FALSE(Readable(s.events.fd(), 0)) << "an event for a connection never made";
    s.qp->close();
}

// A client that gives up during set-up, offering shared memory: a server that accepted already
// watches only the offer's control socket (its streams left tcp), so that socket must end then,
// not when the client deletes its connection.
TEST_F(TcpDomainTest, AClientThatGivesUpDuringSetUpEndsItsOffer) {
    ProviderEnv shm("shm");
    Side c;
    std::unique_ptr<prov::IncomingRequest> req;
    ASSERT_NO_FATAL_FAILURE(Request("25716", c, &req));
    auto &link = static_cast<tcp::Incoming *>(req.get())->conn.upgrade;
    ASSERT_NE(link, nullptr) << "the client offered no shared memory";
    ASSERT_FALSE(Ended(link->ctl_fd(), 0));
    ASSERT_EQ(c.qp->disconnect(), 0);
    EXPECT_EQ(NextEvent(c), RPMA_CONN_LOST);
    EXPECT_TRUE(Ended(link->ctl_fd())) << "the offer's control socket still open";
    c.qp->close();
}

// A raw client's stream to port: its Hello (main or join, one token) sent.
Fd RawStream(uint16_t port, bool main) {
    Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!s.valid() || ::connect(s.get(), reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0)
        return Fd();
    tcp::Hello h{};
    h.magic = tcp::kMagic;
    h.version = tcp::kProtocolVersion;
    h.role = static_cast<uint8_t>(main ? tcp::StreamRole::kMain : tcp::StreamRole::kJoin);
    h.token = 0x5e77;
    h.qp_num = 7;
    if (::send(s.get(), &h, sizeof(h), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(h)))
        return Fd();
    return s;
}

// Whether the server's kernel acknowledged our end of stream (its socket has seen it).
bool EndAcknowledged(int fd) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
    while (std::chrono::steady_clock::now() < until) {
        tcp_info ti{};
        socklen_t len = sizeof(ti);
        if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return false;
        if (ti.tcpi_state == TCP_FIN_WAIT2) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
}

// RDMA CM hands out no request whose client has gone: the call finds none, or the next one.
TEST_F(TcpDomainTest, ARequestWhoseClientHasGoneIsNotHandedOut) {
    ASSERT_EQ(dom_->listen("127.0.0.1", "25714", &l_), 0);
    ASSERT_NO_FATAL_FAILURE(NonBlocking(l_->fd()));
    Fd main = RawStream(25714, true), join = RawStream(25714, false);
    ASSERT_TRUE(main.valid() && join.valid());
    ASSERT_TRUE(Readable(l_->fd())) << "no request within " << kWaitMs << " ms";
    ASSERT_EQ(::shutdown(main.get(), SHUT_WR), 0);
    ASSERT_TRUE(EndAcknowledged(main.get()));
    EXPECT_EQ(l_->next(), nullptr);
    EXPECT_FALSE(Readable(l_->fd(), 0)) << "the dropped request is still counted";

    // one behind it is handed out
    Side c;
    std::unique_ptr<prov::IncomingRequest> req;
    ASSERT_NO_FATAL_FAILURE(RequestTo("25714", c, &req));
    req.reset();
    EXPECT_EQ(NextEvent(c), RPMA_CONN_REJECTED);
    c.qp->close();
}

// The queue pair is the send CQ's progress hook (a waiting or polling thread reads the answers
// itself) from creation until close.
TEST_F(TcpDomainTest, QueuePairsProgressIsItsCqsHookUntilClosed) {
    Side c;
    ASSERT_NO_FATAL_FAILURE(MakeSide(c));
    ASSERT_EQ(dom_->create_qp("127.0.0.1", "25712", c.attr(), &c.qp), 0);
    auto *cq = static_cast<Cq *>(c.cq.get());
    EXPECT_NE(dynamic_cast<rpma::rc::Progress *>(cq->hook()),
              nullptr);  // the queue pair's progress
    c.qp->close();
    EXPECT_EQ(cq->hook(), nullptr);
}

TEST_F(TcpDomainTest, RequestAcceptedThenClosed) {
    Side c, s;
    std::unique_ptr<prov::IncomingRequest> req;
    ASSERT_NO_FATAL_FAILURE(Request("25711", c, &req));
    ASSERT_NO_FATAL_FAILURE(Accept(s, std::move(req), "world!", 6));

    EXPECT_EQ(NextEvent(s), RPMA_CONN_ESTABLISHED);
    EXPECT_EQ(NextEvent(c), RPMA_CONN_ESTABLISHED);
    EXPECT_EQ(Str(c.qp->remote_pdata()), Delivered("world!", 196));
    EXPECT_EQ(Str(s.qp->remote_pdata()), Delivered("hello", 56));
    EXPECT_NE(c.qp->qp_num(), s.qp->qp_num());

    c.qp->close();
    EXPECT_EQ(NextEvent(s), RPMA_CONN_CLOSED);
    s.qp->close();
}

// ---- the listener and its shared-memory offer socket ----

// Whether a client can connect to the offer socket of a listener on `port` now.
bool OfferSocketListens(uint16_t port) {
    Fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::string name = shm::socket_name(port);
    std::memcpy(a.sun_path, name.data(), name.size());
    auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    return s.valid() && ::connect(s.get(), reinterpret_cast<sockaddr *>(&a), len) == 0;
}

// What listen() saw as the tcp socket of a listener started to listen.
struct AtTcpListen {
    int calls = 0;
    bool offer_socket = false;
};
AtTcpListen at_tcp_listen;

void LookForTheOfferSocket(int fd) {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    if (::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0 || a.ss_family != AF_INET)
        return;  // the offer socket itself
    ++at_tcp_listen.calls;
    at_tcp_listen.offer_socket =
        OfferSocketListens(ntohs(reinterpret_cast<sockaddr_in *>(&a)->sin_port));
}

// Once the tcp socket listens, a client may connect, and a client on this host offers shared
// memory first: the offer socket must be there already, or that client stays on tcp (with
// RPMA_PROVIDER=shm, fails). Checked at the moment the tcp socket starts to listen.
TEST_F(TcpDomainTest, TheOfferSocketListensBeforeTheTcpSocket) {
    ProviderEnv shm("shm");
    at_tcp_listen = {};
    test::before_listen = LookForTheOfferSocket;
    int rc = dom_->listen("127.0.0.1", "25730", &l_);
    test::before_listen = nullptr;
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(at_tcp_listen.calls, 1);
    EXPECT_TRUE(at_tcp_listen.offer_socket)
        << "the tcp socket listened before the shared-memory offer socket did";
    // and a client that connects at once moves onto shared memory
    Side c;
    std::unique_ptr<prov::IncomingRequest> req;
    ASSERT_NO_FATAL_FAILURE(RequestTo("25730", c, &req));
    EXPECT_NE(static_cast<tcp::Incoming *>(req.get())->conn.upgrade, nullptr);
    req.reset();
    c.qp->close();
}

// A tcp domain whose way off tcp refuses every offer and takes none (tcp works without shm).
class RefusingUpgrade final : public tcp::StreamUpgrade {
  public:
    std::shared_ptr<tcp::UpgradeLink> offer(int, uint64_t, std::string *why) override {
        ++offers;
        *why = "the test's upgrade refuses";
        return nullptr;
    }
    std::shared_ptr<tcp::UpgradeDesk> open_desk(Engine *, uint16_t) override {
        ++desks;
        return nullptr;
    }
    int offers = 0, desks = 0;
};

class TcpRefusingUpgradeTest : public TcpDomainTest {
  protected:
    void SetUp() override { dom_ = std::make_unique<tcp::Domain>(&upgrade_); }
    RefusingUpgrade upgrade_;
};

// The listener asks for a desk, the client for an offer, once each; both refuse, and the
// connection is established on tcp.
TEST_F(TcpRefusingUpgradeTest, ConnectionsStayOnTcp) {
    ProviderEnv env(nullptr);
    Side c, s;
    std::unique_ptr<prov::IncomingRequest> req;
    ASSERT_NO_FATAL_FAILURE(Request("25740", c, &req));
    EXPECT_EQ(upgrade_.desks, 1);
    EXPECT_EQ(upgrade_.offers, 1);
    EXPECT_EQ(static_cast<tcp::Incoming *>(req.get())->conn.upgrade, nullptr);
    ASSERT_NO_FATAL_FAILURE(Accept(s, std::move(req), "world!", 6));
    EXPECT_EQ(NextEvent(s), RPMA_CONN_ESTABLISHED);
    EXPECT_EQ(NextEvent(c), RPMA_CONN_ESTABLISHED);
    EXPECT_EQ(Str(c.qp->remote_pdata()), Delivered("world!", 196));
    c.qp->close();
    EXPECT_EQ(NextEvent(s), RPMA_CONN_CLOSED);
    s.qp->close();
}

// Lowers RLIMIT_NOFILE to a little above the highest descriptor open and takes every number
// left below it, so the next descriptor anyone asks for fails with EMFILE; gives all back when
// destroyed.
class NoDescriptorsLeft {
  public:
    NoDescriptorsLeft() {
        Fd src(::eventfd(0, EFD_CLOEXEC));
        if (!src.valid() || ::getrlimit(RLIMIT_NOFILE, &saved_) != 0) return;
        int highest = 0;
        for (const auto &e : std::filesystem::directory_iterator("/proc/self/fd"))
            highest = std::max(highest, std::atoi(e.path().filename().c_str()));
        rlimit low = saved_;
        low.rlim_cur = static_cast<rlim_t>(highest + 16);
        if (low.rlim_cur > saved_.rlim_cur || ::setrlimit(RLIMIT_NOFILE, &low) != 0) return;
        lowered_ = true;
        held_.reserve(64);
        for (int fd; (fd = ::fcntl(src.get(), F_DUPFD_CLOEXEC, 0)) >= 0;) held_.emplace_back(fd);
        ok_ = errno == EMFILE;
    }
    ~NoDescriptorsLeft() {
        held_.clear();
        if (lowered_) ::setrlimit(RLIMIT_NOFILE, &saved_);
    }
    bool ok() const noexcept { return ok_; }

  private:
    rlimit saved_{};
    bool lowered_ = false, ok_ = false;
    std::vector<Fd> held_;
};

// A listener whose accept fails for lack of descriptors must not spin (its socket stays readable
// while connections wait in the backlog): it stops polling and tries again after a back-off, 10
// ms doubling to 1 s, so at most 7 tries in the first 1.27 s and one a second after that, however
// loaded the machine. Once descriptors are back it serves a client by itself. For the tcp socket
// (false) and the shared-memory offer socket (true) alike.
class ListenerOutOfDescriptorsTest : public TcpDomainTest,
                                     public ::testing::WithParamInterface<bool> {};

TEST_P(ListenerOutOfDescriptorsTest, BacksOffAndServesAClientOnceDescriptorsAreBack) {
    const bool offers = GetParam();
    const uint16_t port = offers ? 25731 : 25732;
    const std::string port_str = std::to_string(port);
    ProviderEnv shm("shm");
    ASSERT_EQ(dom_->listen("127.0.0.1", port_str.c_str(), &l_), 0);
    // connections that wait in the backlog: raw ones, made while there are descriptors
    std::vector<Fd> raw;
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    std::string name = shm::socket_name(port);
    std::memcpy(un.sun_path, name.data(), name.size());
    const sockaddr *to =
        offers ? reinterpret_cast<sockaddr *>(&un) : reinterpret_cast<sockaddr *>(&in);
    auto to_len =
        static_cast<socklen_t>(offers ? offsetof(sockaddr_un, sun_path) + name.size() : sizeof(in));
    for (int i = 0; i < 4; ++i) {
        raw.emplace_back(::socket(offers ? AF_UNIX : AF_INET,
                                  (offers ? SOCK_SEQPACKET : SOCK_STREAM) | SOCK_CLOEXEC, 0));
        ASSERT_TRUE(raw.back().valid());
    }
    long tries = 0;
    double secs = 0;
    {
        NoDescriptorsLeft none;
        ASSERT_TRUE(none.ok());
        test::emfile_accepts = 0;
        test::count_emfile = true;
        for (Fd &s : raw) ASSERT_EQ(::connect(s.get(), to, to_len), 0);
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (test::emfile_accepts.load() == 0 && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ASSERT_GT(test::emfile_accepts.load(), 0) << "accept never ran out of descriptors";
        long before = test::emfile_accepts.load();
        auto t0 = std::chrono::steady_clock::now();
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        tries = test::emfile_accepts.load() - before;
        secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    test::count_emfile = false;
    EXPECT_LE(tries, 7 + static_cast<long>(secs))
        << "the listener tried to accept " << tries << " times in " << secs << " s";
    // descriptors are back: a client is served without anyone's help, on shared memory
    Side c;
    std::unique_ptr<prov::IncomingRequest> req;
    ASSERT_NO_FATAL_FAILURE(RequestTo(port_str.c_str(), c, &req));
    EXPECT_NE(static_cast<tcp::Incoming *>(req.get())->conn.upgrade, nullptr);
    req.reset();
    c.qp->close();
}

INSTANTIATE_TEST_SUITE_P(TcpOrOffers, ListenerOutOfDescriptorsTest, ::testing::Bool());

// A thread waiting on (or polling) its CQ serves the peer's requests itself: a message
// arrives while the engine thread is kept busy, and the waiter still gets its receive.
class TcpWaiterServesTest : public TcpDomainTest, public ::testing::WithParamInterface<bool> {
  protected:
    void Connect(const char *port) {
        std::unique_ptr<prov::IncomingRequest> req;
        ASSERT_NO_FATAL_FAILURE(Request(port, c_, &req));
        ASSERT_NO_FATAL_FAILURE(Accept(s_, std::move(req), nullptr, 0));
        ASSERT_EQ(NextEvent(s_), RPMA_CONN_ESTABLISHED);
        ASSERT_EQ(NextEvent(c_), RPMA_CONN_ESTABLISHED);
        ASSERT_EQ(dom_->register_memory(buf_, sizeof(buf_), RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV,
                                        &mr_),
                  0);
    }
    // Keeps the engine thread busy until Release().
    void BlockEngine() {
        auto *engine = static_cast<tcp::Domain *>(dom_.get())->engine();
        std::shared_future<void> go = release_.get_future().share();
        std::promise<void> started;
        engine->post([go, &started] {
            started.set_value();
            go.wait();
        });
        started.get_future().wait();
    }
    void Release() {
        if (!released_) release_.set_value();
        released_ = true;
    }
    // A 4-byte send from buf_, signaled.
    prov::SendWr Send(uint64_t id) {
        prov::SendWr w;
        w.op = prov::WrOp::kSend;
        w.wr_id = id;
        w.local = buf_;
        w.len = 4;
        w.local_region = &mr_;
        return w;
    }
    // The next completion on side's CQ, by rpma_cq_wait or a polling loop (GetParam); wr_id 0
    // if none came within 5 s.
    ibv_wc Next(Side &side) {
        ibv_wc wc{};
        int n = 0;
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (std::chrono::steady_clock::now() < until) {
            if (GetParam() && side.cq->wait() != 0) break;
            if (side.cq->get_wc(1, &wc, &n) == 0) return wc;
        }
        wc.wr_id = 0;
        return wc;
    }
    void TearDown() override {
        Release();
        if (c_.qp) c_.qp->close();
        if (s_.qp) s_.qp->close();
        if (mr_) dom_->deregister(mr_);
        TcpDomainTest::TearDown();
    }

    // On tcp: a loopback connection would move onto shm, whose doorbells the cases do not cover.
    struct OnTcp : ProviderEnv {
        OnTcp() : ProviderEnv("tcp") {}
    };
    // With nobody waiting on c_ any more: a send's answer reaches c_'s completion channel, that
    // is the engine took c_'s socket back.
    void AnswerReachesTheChannel(uint64_t id) {
        // Events for completions the engine delivered meanwhile go first: only the next counts.
        ASSERT_NO_FATAL_FAILURE(NonBlocking(c_.ch->fd()));
        while (c_.ch->wait()) {
        }
        ASSERT_EQ(s_.qp->post_recv(prov::RecvWr{mr_, buf_ + 128, 64, id, true}), 0);
        c_.cq->arm();
        ASSERT_EQ(c_.qp->post_send(Send(id)), 0);
        ASSERT_TRUE(Readable(c_.ch->fd(), 5000)) << "the engine did not take the answers back";
        ibv_wc wc{};
        int n = 0;
        EXPECT_EQ(c_.cq->get_wc(1, &wc, &n), 0);
        EXPECT_EQ(wc.wr_id, id);
    }
    // The engine thread's voluntary context switches so far: one per sleep it woke from.
    long EngineSleeps() {
        auto *engine = static_cast<tcp::Domain *>(dom_.get())->engine();
        if (!engine_tid_) engine->run_sync([this] { engine_tid_ = ::gettid(); });
        std::ifstream f("/proc/self/task/" + std::to_string(engine_tid_) + "/status");
        std::string line;
        while (std::getline(f, line))
            if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(24));
        return -1;
    }

    Side c_, s_;
    pid_t engine_tid_ = 0;
    char buf_[256] = {};
    std::shared_ptr<prov::MemoryRegion> mr_;
    std::promise<void> release_;
    bool released_ = false;
};

TEST_P(TcpWaiterServesTest, MessageWhileTheEngineIsBusy) {
    ASSERT_NO_FATAL_FAILURE(Connect(GetParam() ? "25720" : "25721"));
    ASSERT_EQ(s_.qp->post_recv(prov::RecvWr{mr_, buf_ + 128, 64, 7, true}), 0);
    BlockEngine();
    std::memcpy(buf_, "ping", 4);
    ASSERT_EQ(c_.qp->post_send(Send(0)), 0);  // goes out from this thread
    // rpma_cq_wait, or a busy rpma_cq_get_wc loop
    auto got = std::async(std::launch::async, [&] { return Next(s_); });
    bool in_time = got.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    Release();  // a waiter that never got it returns once the engine delivers
    ibv_wc wc = got.get();
    EXPECT_TRUE(in_time) << "the receive waited for the engine thread";
    EXPECT_EQ(wc.wr_id, 7u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(std::memcmp(buf_ + 128, "ping", 4), 0);
}

// A waiter that served requests lets the engine off the request stream only while it waits:
// once it has gone, the next message is delivered by the engine alone.
TEST_P(TcpWaiterServesTest, EngineServesOnceTheWaiterLeaves) {
    ASSERT_NO_FATAL_FAILURE(Connect(GetParam() ? "25722" : "25723"));
    for (uint64_t id = 1; id <= 3; ++id) {  // served by this thread, as a waiter
        ASSERT_EQ(s_.qp->post_recv(prov::RecvWr{mr_, buf_ + 128, 64, id, true}), 0);
        ASSERT_EQ(c_.qp->post_send(Send(0)), 0);
        ASSERT_EQ(Next(s_).wr_id, id);
    }
    // a wait that ends with an answer, not a request: the waiter still hands the stream back
    ASSERT_EQ(c_.qp->post_recv(prov::RecvWr{mr_, buf_ + 192, 64, 50, true}), 0);
    ASSERT_EQ(s_.qp->post_send(Send(40)), 0);
    ASSERT_EQ(Next(s_).wr_id, 40u);
    ibv_wc wc{};
    int n = 0;
    while (s_.cq->get_wc(1, &wc, &n) == 0) {
    }
    // nobody waits now: the engine must deliver the next one, and the channel must fire
    ASSERT_EQ(s_.qp->post_recv(prov::RecvWr{mr_, buf_ + 128, 64, 9, true}), 0);
    s_.cq->arm();
    ASSERT_EQ(c_.qp->post_send(Send(0)), 0);
    EXPECT_TRUE(Readable(s_.ch->fd(), 5000)) << "the engine did not take the stream back";
}

// A waiter takes its socket from the engine and keeps it between waits (Stream::sleeper), so
// the engine neither wakes for the answers nor pays an epoll_ctl per wait; once nobody waits
// any more the engine's check gives it back, and an answer that follows reaches the completion
// channel without another wait.
TEST_P(TcpWaiterServesTest, AnswersReachTheChannelAfterTheLastWait) {
    OnTcp on_tcp;
    ASSERT_NO_FATAL_FAILURE(Connect(GetParam() ? "25724" : "25725"));
    for (uint64_t id = 1; id <= 3; ++id) {  // the answers read by this thread
        ASSERT_EQ(s_.qp->post_recv(prov::RecvWr{mr_, buf_ + 128, 64, id, true}), 0);
        ASSERT_EQ(c_.qp->post_send(Send(id)), 0);
        ASSERT_EQ(Next(c_).wr_id, id);
    }
    ASSERT_NO_FATAL_FAILURE(AnswerReachesTheChannel(4));
}

// The same after a thread read its answers across many of the engine's checks, each further off
// than the last (up to 8 ms): once it stops, the engine still takes the socket back.
TEST_P(TcpWaiterServesTest, AnswersReachTheChannelAfterLongReading) {
    OnTcp on_tcp;
    ASSERT_NO_FATAL_FAILURE(Connect(GetParam() ? "25729" : "25730"));
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(60);
    ibv_wc wc{};
    int n = 0;
    for (uint64_t id = 1; std::chrono::steady_clock::now() < until; ++id) {
        ASSERT_EQ(s_.qp->post_recv(prov::RecvWr{mr_, buf_ + 128, 64, id, true}), 0);
        ASSERT_EQ(c_.qp->post_send(Send(id)), 0);
        ASSERT_EQ(Next(c_).wr_id, id);
        while (s_.cq->get_wc(1, &wc, &n) == 0) {
        }
    }
    ASSERT_NO_FATAL_FAILURE(AnswerReachesTheChannel(1000));
}

// A thread asleep in a wait costs the engine no wake-up per millisecond: two checks find the
// socket unread and give it back, and then nothing is checked until a thread takes it again.
TEST_P(TcpWaiterServesTest, AnIdleWaiterLetsTheEngineSleep) {
    if (!GetParam()) GTEST_SKIP() << "a polling thread is never asleep in a wait";
    OnTcp on_tcp;
    ASSERT_NO_FATAL_FAILURE(Connect("25726"));
    for (uint64_t id = 1; id <= 2; ++id) {  // requests served by this side's waiter
        ASSERT_EQ(s_.qp->post_recv(prov::RecvWr{mr_, buf_ + 128, 64, id, true}), 0);
        ASSERT_EQ(c_.qp->post_send(Send(id)), 0);
        ASSERT_EQ(Next(s_).wr_id, id);
    }
    ASSERT_EQ(s_.qp->post_recv(prov::RecvWr{mr_, buf_ + 128, 64, 3, true}), 0);
    auto got = std::async(std::launch::async, [&] { return Next(s_); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // asleep in the wait by now
    long before = EngineSleeps();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    long woke = EngineSleeps() - before;
    ASSERT_EQ(c_.qp->post_send(Send(3)), 0);
    EXPECT_EQ(got.get().wr_id, 3u);
    ASSERT_GE(before, 0);
    // a check every millisecond would be about 300
    EXPECT_LT(woke, 30) << "the engine woke " << woke << " times in 300 ms of one idle wait";
    // and once the waiter has gone, the engine has the socket back: the channel fires
    ASSERT_EQ(s_.qp->post_recv(prov::RecvWr{mr_, buf_ + 128, 64, 4, true}), 0);
    s_.cq->arm();
    ASSERT_EQ(c_.qp->post_send(Send(4)), 0);
    EXPECT_TRUE(Readable(s_.ch->fd(), 5000)) << "the engine did not take the socket back";
}

// The engine's checks of a socket a thread took, on a stopped clock (soft/clock.h), so that each
// step is exact however slow the machine: the first check comes 1 ms after the take, each that
// finds the socket read since then doubles the next one's delay up to 8 ms, and one that finds
// it unread gives it back (and the next take is checked after 1 ms again). A socket given back
// shows: an answer waiting in it is read by the engine and reaches the completion channel.
class TcpParkCheckTest : public TcpWaiterServesTest {
  protected:
    // The clock stops for the test's steps and runs again, whatever the outcome, at its end.
    struct StoppedClock {
        StoppedClock() { Clock::stop_at_for_tests(Clock::now()); }
        ~StoppedClock() { Clock::stop_at_for_tests(Clock::time_point{}); }
    };
    // After two of the engine's turns every timer due by t has run: the second command runs in
    // a turn that began after the first's turn fired its timers.
    void MoveTo(Clock::time_point t) {
        Clock::stop_at_for_tests(t);
        Flush();
    }
    void Flush() {
        auto *engine = static_cast<tcp::Domain *>(dom_.get())->engine();
        engine->run_sync([] {});
        engine->run_sync([] {});
    }
    // A send whose answer this thread reads: it takes (or keeps) c_'s answer socket. It polls
    // once first, so that it has the socket before the answer comes (else the engine may read
    // that answer, and the poll that gets the completion takes nothing).
    void RoundTrip(uint64_t id) {
        Flush();
        ibv_wc wc{};
        int n = 0;
        ASSERT_EQ(c_.cq->get_wc(1, &wc, &n), RPMA_E_NO_COMPLETION);
        ASSERT_EQ(s_.qp->post_recv(prov::RecvWr{mr_, buf_ + 128, 64, id, true}), 0);
        ASSERT_EQ(c_.qp->post_send(Send(id)), 0);
        ASSERT_EQ(Next(c_).wr_id, id);
        ASSERT_EQ(NextServed().wr_id, id);
    }
    // The server's completion of a send (its engine serves it): its answer has left.
    ibv_wc NextServed() {
        ibv_wc wc{};
        int n = 0;
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (std::chrono::steady_clock::now() < until)
            if (s_.cq->get_wc(1, &wc, &n) == 0) return wc;
        wc.wr_id = 0;
        return wc;
    }
    // A send whose answer nobody reads: it waits in c_'s socket (the engine's turn that served
    // it has ended, so the answer was sent) for whoever watches that socket. The engine's turns
    // first: one whose epoll_wait returned before this thread took the socket may still read
    // it once, and would read this answer if it came meanwhile.
    void AnswerWaits(uint64_t id) {
        Flush();
        ASSERT_NO_FATAL_FAILURE(NonBlocking(c_.ch->fd()));
        while (c_.ch->wait()) {
        }
        ASSERT_EQ(s_.qp->post_recv(prov::RecvWr{mr_, buf_ + 128, 64, id, true}), 0);
        c_.cq->arm();
        ASSERT_EQ(c_.qp->post_send(Send(id)), 0);
        ASSERT_EQ(NextServed().wr_id, id);
        Flush();
    }
    // The waiting answer reaches the channel (the socket was given back) exactly at `at`.
    void GivenBackAt(Clock::time_point at, uint64_t id) {
        MoveTo(at - Clock::duration(1));
        EXPECT_FALSE(Readable(c_.ch->fd(), 0)) << "given back before it was due";
        MoveTo(at);
        ASSERT_TRUE(Readable(c_.ch->fd(), 5000)) << "not given back when due";
        ibv_wc wc{};
        int n = 0;
        EXPECT_EQ(c_.cq->get_wc(1, &wc, &n), 0);
        EXPECT_EQ(wc.wr_id, id);
        while (c_.ch->wait()) {
        }
        set_nonblocking(c_.ch->fd(), false);  // blocking again, for Next's waits
        ASSERT_FALSE(nonblocking(c_.ch->fd()));
    }
};

TEST_P(TcpParkCheckTest, ChecksBackOffWhileAThreadReadsAndStartOverOnceGivenBack) {
    using std::chrono::milliseconds;
    OnTcp on_tcp;
    ASSERT_NO_FATAL_FAILURE(Connect("25733"));
    StoppedClock stopped;
    const Clock::time_point t0 = Clock::now();
    ASSERT_NO_FATAL_FAILURE(RoundTrip(1));  // taken: checked at t0 + 1
    ASSERT_NO_FATAL_FAILURE(AnswerWaits(2));
    MoveTo(t0 + milliseconds(1));  // read since the take: checked again 2 ms on
    EXPECT_FALSE(Readable(c_.ch->fd(), 0)) << "given back by the first check";
    ASSERT_NO_FATAL_FAILURE(GivenBackAt(t0 + milliseconds(3), 2));

    // taken anew: 1 ms, then 2, 4, 8 and 8 while this thread reads between the checks
    const Clock::time_point t1 = Clock::now();
    ASSERT_NO_FATAL_FAILURE(RoundTrip(3));
    uint64_t id = 4;
    for (int at : {1, 3, 7, 15}) {
        MoveTo(t1 + milliseconds(at) - Clock::duration(1));
        ASSERT_NO_FATAL_FAILURE(RoundTrip(id++));  // before the check
        MoveTo(t1 + milliseconds(at));
    }
    ASSERT_NO_FATAL_FAILURE(AnswerWaits(id));  // not read since the check at t1 + 15
    ASSERT_NO_FATAL_FAILURE(GivenBackAt(t1 + milliseconds(23), id));
}

// A polling thread only: it takes the socket at every poll, where a waiter takes it only when it
// has to sleep, that is when the engine did not read the answer first.
INSTANTIATE_TEST_SUITE_P(Poll, TcpParkCheckTest, ::testing::Values(false));

INSTANTIATE_TEST_SUITE_P(WaitOrPoll, TcpWaiterServesTest, ::testing::Bool());

// A target engine that served requests from a socket polls its epoll set for RPMA_SPIN_US
// before it sleeps (the next request usually follows within microseconds), and sleeps again
// once they stop. With RPMA_SPIN_US=0 it never polls. GetParam: a 1 ms window, or 0.
class TcpEnginePollsTest : public TcpWaiterServesTest {
  protected:
    void SetUp() override {
        ::setenv("RPMA_SPIN_US", GetParam() ? "1000" : "0", 1);
        TcpWaiterServesTest::SetUp();
        // the engine reads it as it starts
        ASSERT_NE(static_cast<tcp::Domain *>(dom_.get())->engine(), nullptr);
        ::unsetenv("RPMA_SPIN_US");
    }
};

TEST_P(TcpEnginePollsTest, PollsAfterServingWritesThenSleeps) {
    OnTcp on_tcp;
    ASSERT_NO_FATAL_FAILURE(Connect(GetParam() ? "25727" : "25728"));
    char dst[64] = {};
    std::shared_ptr<prov::MemoryRegion> dst_mr;
    ASSERT_EQ(dom_->register_memory(dst, sizeof(dst), RPMA_MR_USAGE_WRITE_DST, &dst_mr), 0);
    for (uint64_t id = 1; id <= 10; ++id) {  // each served by the target side's engine
        std::memset(buf_, static_cast<int>('a' + id), 8);
        prov::SendWr w = Send(id);  // as a write of 8 bytes
        w.op = prov::WrOp::kWrite;
        w.len = 8;
        w.raddr = reinterpret_cast<uint64_t>(dst) + id * 4;
        w.rkey = dst_mr->rkey();
        ASSERT_EQ(c_.qp->post_send(std::move(w)), 0);
        ibv_wc wc = Next(c_);
        ASSERT_EQ(wc.wr_id, id);
        ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
    }
    EXPECT_EQ(std::string(dst + 40, 8), std::string(8, 'a' + 10));
    auto *engine = static_cast<tcp::Domain *>(dom_.get())->engine();
    pid_t tid = 0;
    engine->run_sync([&] { tid = ::gettid(); });
    // A window that never closed would keep the thread out of every sleep.
    bool slept = false;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
         !slept && std::chrono::steady_clock::now() < until;
         std::this_thread::sleep_for(std::chrono::milliseconds(1)))
        slept = test::ThreadState(tid) == 'S';
    EXPECT_TRUE(slept) << "the engine kept polling after the writes stopped";
    uint64_t looks = 0;
    engine->run_sync([&] { looks = engine->busy_looks(); });
    if (GetParam())
        EXPECT_GT(looks, 0u) << "the engine slept after every request";
    else
        EXPECT_EQ(looks, 0u) << "RPMA_SPIN_US=0, yet the engine polled";
    dom_->deregister(dst_mr);
}

INSTANTIATE_TEST_SUITE_P(WindowOrNone, TcpEnginePollsTest, ::testing::Bool());

}  // namespace
