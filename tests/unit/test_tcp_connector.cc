// tcp::Connector (tcp/connector.h) and the StreamUpgrade seam (tcp/upgrade.h) without shm: the
// handshake's steps over socket pairs, with fake upgrades that refuse or offer. A whole
// connection through a refusing upgrade: TcpRefusingUpgradeTest (test_tcp_domain.cc).
#include <gtest/gtest.h>
#include <librpma.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../support/socket_pair.h"
#include "provider/tcp/connector.h"
#include "provider/tcp/socket_stream.h"
#include "provider_env.h"

using namespace rpma;
using tcp::Connector;

namespace {

using test::ProviderEnv;

class FakeLink final : public tcp::UpgradeLink {
  public:
    int ctl_fd() const noexcept override { return -1; }
    Fd take_wake(bool) noexcept override { return Fd(); }
    std::unique_ptr<rc::ByteStream> stream(bool, int) override { return nullptr; }
    void peer_gone() noexcept override {}
};

// Offers a FakeLink, or refuses with a reason; counts what it was asked.
class FakeUpgrade final : public tcp::StreamUpgrade {
  public:
    explicit FakeUpgrade(bool offers) : offers_(offers) {}
    std::shared_ptr<tcp::UpgradeLink> offer(int, uint64_t token, std::string *why) override {
        ++offers;
        last_token = token;
        if (offers_) return std::make_shared<FakeLink>();
        *why = "the fake refuses";
        return nullptr;
    }
    std::shared_ptr<tcp::UpgradeDesk> open_desk(Engine *, uint16_t) override {
        ++desks;
        return nullptr;
    }
    int offers = 0, desks = 0;
    uint64_t last_token = 0;

  private:
    bool offers_;
};

// A connected socket pair: the connector's end and the peer's.
struct Pair {
    Pair() { EXPECT_TRUE(test::socket_pair(&ours, &peer)); }
    template <class T>
    T read_peer() {
        T t{};
        EXPECT_EQ(::recv(peer.get(), &t, sizeof(t), MSG_DONTWAIT), static_cast<ssize_t>(sizeof(t)));
        return t;
    }
    void write_peer(const void *p, size_t n) {
        EXPECT_EQ(::send(peer.get(), p, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
    }
    // The connector's read_reply on our end; what it delivers lands in qp and pdata.
    Connector::Step reply_to(Connector &c) {
        tcp::SocketStream io(&ours);
        return c.read_reply(io, &qp, &pdata);
    }
    Fd ours, peer;
    uint32_t qp = 0;
    std::vector<uint8_t> pdata;
};

tcp::Reply Accepting(uint16_t flags) {
    tcp::Reply r{};
    r.magic = tcp::kMagic;
    r.kind = static_cast<uint8_t>(tcp::ReplyKind::kAccept);
    r.flags = flags;
    r.qp_num = 77;
    r.pdata_len = 2;
    r.pdata[0] = 'o';
    r.pdata[1] = 'k';
    return r;
}

// A client's connector with a FakeUpgrade (or, upgraded = false, none) and its main Hello sent
// over a socket pair: st says how that went, hello is what the peer got.
struct Client {
    explicit Client(bool offers, bool upgraded = true) : up(offers), c(upgraded ? &up : nullptr) {
        c.start("hi", 2, 1000);
        st = send(true);
        if (st.kind == Connector::Step::kDone) hello = p.read_peer<tcp::Hello>();
    }
    Connector::Step send(bool main) {
        tcp::SocketStream io(&p.ours);
        return c.send_hello(p.ours.get(), io, main, 42);
    }
    FakeUpgrade up;
    Connector c;
    Pair p;
    Connector::Step st;
    tcp::Hello hello{};
};

}  // namespace

TEST(TcpConnector, WithoutAnUpgradeTheHelloOffersNothing) {
    ProviderEnv env(nullptr);
    Client cl(false, false);
    ASSERT_EQ(cl.st.kind, Connector::Step::kDone);
    EXPECT_EQ(cl.hello.magic, tcp::kMagic);
    EXPECT_EQ(cl.hello.role, static_cast<uint8_t>(tcp::StreamRole::kMain));
    EXPECT_EQ(cl.hello.qp_num, 42u);
    EXPECT_EQ(cl.hello.pdata_len, 2);
    EXPECT_EQ(std::string(reinterpret_cast<const char *>(cl.hello.pdata), 2), "hi");
    EXPECT_EQ(cl.hello.flags & tcp::kHelloShmOffer, 0u);
    EXPECT_EQ(cl.c.link(), nullptr);
}

TEST(TcpConnector, ARefusingUpgradeLeavesTheConnectionOnTcp) {
    ProviderEnv env(nullptr);
    Client cl(false);
    ASSERT_EQ(cl.st.kind, Connector::Step::kDone);
    EXPECT_EQ(cl.up.offers, 1);
    EXPECT_EQ(cl.up.last_token, cl.hello.token);
    EXPECT_EQ(cl.hello.flags & tcp::kHelloShmOffer, 0u);
    // and the join Hello carries the same token, no offer
    ASSERT_EQ(cl.send(false).kind, Connector::Step::kDone);
    tcp::Hello j = cl.p.read_peer<tcp::Hello>();
    EXPECT_EQ(j.role, static_cast<uint8_t>(tcp::StreamRole::kJoin));
    EXPECT_EQ(j.token, cl.hello.token);
    EXPECT_EQ(j.pdata_len, 0);
    EXPECT_EQ(cl.up.offers, 1);
}

TEST(TcpConnector, ProviderTcpAsksNoUpgrade) {
    ProviderEnv env("tcp");
    Client cl(true);
    ASSERT_EQ(cl.st.kind, Connector::Step::kDone);
    EXPECT_EQ(cl.up.offers, 0);
    EXPECT_EQ(cl.hello.flags & tcp::kHelloShmOffer, 0u);
}

TEST(TcpConnector, ProviderShmFailsWhenNoOfferCanBeMade) {
    ProviderEnv env("shm");
    Client cl(false);
    EXPECT_EQ(cl.st.kind, Connector::Step::kFail);
    EXPECT_EQ(cl.st.event, RPMA_CONN_UNREACHABLE);
    char b;
    EXPECT_EQ(::recv(cl.p.peer.get(), &b, 1, MSG_DONTWAIT), -1) << "a Hello went out";
}

TEST(TcpConnector, AnOfferIsKeptOnlyWhenTheReplyTakesIt) {
    ProviderEnv env(nullptr);
    for (uint16_t flags : {uint16_t{0}, tcp::kReplyShm}) {
        Client cl(true);
        ASSERT_EQ(cl.st.kind, Connector::Step::kDone);
        EXPECT_NE(cl.hello.flags & tcp::kHelloShmOffer, 0u);
        ASSERT_NE(cl.c.link(), nullptr);
        tcp::Reply r = Accepting(flags);
        cl.p.write_peer(&r, sizeof(r));
        ASSERT_EQ(cl.p.reply_to(cl.c).kind, Connector::Step::kDone);
        EXPECT_EQ(cl.p.qp, 77u);
        ASSERT_GE(cl.p.pdata.size(), 2u);
        EXPECT_EQ(std::string(cl.p.pdata.begin(), cl.p.pdata.begin() + 2), "ok");
        EXPECT_EQ(cl.c.link() != nullptr, flags == tcp::kReplyShm);
    }
}

TEST(TcpConnector, ProviderShmRefusesAReplyThatKeepsTcp) {
    ProviderEnv env("shm");
    Client cl(true);
    ASSERT_EQ(cl.st.kind, Connector::Step::kDone);
    tcp::Reply r = Accepting(0);
    cl.p.write_peer(&r, sizeof(r));
    Connector::Step got = cl.p.reply_to(cl.c);
    EXPECT_EQ(got.kind, Connector::Step::kFail);
    EXPECT_EQ(got.event, RPMA_CONN_REJECTED);
}

TEST(TcpConnector, TheReplyIsReadInPiecesAndNothingBeyondIt) {
    Connector c(nullptr);
    Pair p;
    tcp::Reply r = Accepting(0);
    EXPECT_EQ(p.reply_to(c).kind, Connector::Step::kWait);  // nothing yet
    p.write_peer(&r, 10);
    EXPECT_EQ(p.reply_to(c).kind, Connector::Step::kWait);
    const char after[] = "frames";
    p.write_peer(reinterpret_cast<const char *>(&r) + 10, sizeof(r) - 10);
    p.write_peer(after, sizeof(after));
    ASSERT_EQ(p.reply_to(c).kind, Connector::Step::kDone);
    EXPECT_EQ(p.qp, 77u);
    char rest[sizeof(after)];
    EXPECT_EQ(::recv(p.ours.get(), rest, sizeof(rest), MSG_DONTWAIT),
              static_cast<ssize_t>(sizeof(after)));
    EXPECT_STREQ(rest, after);
}

TEST(TcpConnector, BadRepliesFailTheConnection) {
    struct Case {
        const char *what;
        tcp::Reply reply;
        rpma_conn_event event;
    } cases[] = {
        {"reject", Accepting(0), RPMA_CONN_REJECTED},
        {"bad magic", Accepting(0), RPMA_CONN_LOST},
        {"bad kind", Accepting(0), RPMA_CONN_LOST},
        {"long pdata", Accepting(0), RPMA_CONN_LOST},
    };
    cases[0].reply.kind = static_cast<uint8_t>(tcp::ReplyKind::kReject);
    cases[1].reply.magic ^= 1;
    cases[2].reply.kind = 9;
    cases[3].reply.pdata_len = tcp::kAcceptPdataMax + 1;
    for (auto &k : cases) {
        Connector c(nullptr);
        Pair p;
        p.write_peer(&k.reply, sizeof(k.reply));
        Connector::Step st = p.reply_to(c);
        EXPECT_EQ(st.kind, Connector::Step::kFail) << k.what;
        EXPECT_EQ(st.event, k.event) << k.what;
    }
    // the server closed before answering
    Connector c(nullptr);
    Pair p;
    p.peer.reset();
    Connector::Step st = p.reply_to(c);
    EXPECT_EQ(st.kind, Connector::Step::kFail);
    EXPECT_EQ(st.event, RPMA_CONN_REJECTED);
}

TEST(TcpConnector, TheServerSaysWhetherTheStreamsMove) {
    for (bool moves : {false, true}) {
        Connector c(nullptr);
        if (moves) c.adopt(std::make_shared<FakeLink>());
        Pair p;
        ASSERT_TRUE(c.send_accept(&p.ours, 5, "yes", 3));
        tcp::Reply r = p.read_peer<tcp::Reply>();
        EXPECT_EQ(r.magic, tcp::kMagic);
        EXPECT_EQ(r.kind, static_cast<uint8_t>(tcp::ReplyKind::kAccept));
        EXPECT_EQ(r.qp_num, 5u);
        EXPECT_EQ(r.pdata_len, 3);
        EXPECT_EQ((r.flags & tcp::kReplyShm) != 0, moves);
    }
    Pair p;
    Connector::reject(p.ours);
    tcp::Reply r = p.read_peer<tcp::Reply>();
    EXPECT_EQ(r.kind, static_cast<uint8_t>(tcp::ReplyKind::kReject));
}
