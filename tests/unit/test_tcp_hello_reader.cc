// The listener's Hello reader over a socket pair: a Hello in pieces, exactly its bytes and no
// more, and every way a peer's first bytes can be refused.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "../support/socket_pair.h"
#include "common/fd.h"
#include "provider/tcp/hello_reader.h"

namespace rpma::tcp {
namespace {

class HelloReaderTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_TRUE(test::socket_pair(&ours_, &peer_));
        hello_.magic = kMagic;
        hello_.version = kProtocolVersion;
        hello_.role = static_cast<uint8_t>(StreamRole::kMain);
        hello_.pdata_len = 3;
        hello_.token = 0x1122334455667788;
        hello_.qp_num = 42;
        std::memcpy(hello_.pdata, "abc", 3);
    }
    void Send(const void *p, size_t n) {
        ASSERT_EQ(::send(peer_.get(), p, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
    }
    HelloReader::Step Read() { return reader_.read(ours_.get()); }

    Fd ours_, peer_;
    Hello hello_{};
    HelloReader reader_;
};

TEST_F(HelloReaderTest, AHelloInPiecesIsReadWholeAndNothingAfterIt) {
    const char *p = reinterpret_cast<const char *>(&hello_);
    EXPECT_EQ(Read(), HelloReader::Step::kMore);  // nothing yet
    ASSERT_NO_FATAL_FAILURE(Send(p, 10));
    EXPECT_EQ(Read(), HelloReader::Step::kMore);
    ASSERT_NO_FATAL_FAILURE(Send(p + 10, sizeof(Hello) - 10));
    ASSERT_NO_FATAL_FAILURE(Send("next", 4));  // the connection's, not the Hello's
    EXPECT_EQ(Read(), HelloReader::Step::kDone);
    EXPECT_TRUE(reader_.main());
    EXPECT_EQ(reader_.hello().token, hello_.token);
    EXPECT_EQ(reader_.hello().qp_num, 42u);
    EXPECT_EQ(std::memcmp(reader_.hello().pdata, "abc", 3), 0);
    EXPECT_EQ(Read(), HelloReader::Step::kDone);  // complete stays complete, reads nothing
    char rest[8] = {};
    EXPECT_EQ(::recv(ours_.get(), rest, sizeof(rest), MSG_DONTWAIT), 4);
    EXPECT_EQ(std::memcmp(rest, "next", 4), 0);
}

TEST_F(HelloReaderTest, AJoinStreamsHelloIsWellFormedToo) {
    hello_.role = static_cast<uint8_t>(StreamRole::kJoin);
    ASSERT_NO_FATAL_FAILURE(Send(&hello_, sizeof(hello_)));
    EXPECT_EQ(Read(), HelloReader::Step::kDone);
    EXPECT_FALSE(reader_.main());
}

TEST_F(HelloReaderTest, TheEndOfStreamBeforeAWholeHelloIsRefused) {
    ASSERT_NO_FATAL_FAILURE(Send(&hello_, sizeof(hello_) - 1));
    ::shutdown(peer_.get(), SHUT_WR);
    EXPECT_EQ(Read(), HelloReader::Step::kMore);
    EXPECT_EQ(Read(), HelloReader::Step::kBad);
}

// One field wrong at a time.
TEST_F(HelloReaderTest, AMalformedHelloIsRefused) {
    auto refused = [&](auto &&spoil) {
        Fd a, b;
        EXPECT_TRUE(test::socket_pair(&a, &b));
        Hello h = hello_;
        spoil(h);
        EXPECT_EQ(::send(b.get(), &h, sizeof(h), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(h)));
        HelloReader r;
        return r.read(a.get()) == HelloReader::Step::kBad;
    };
    EXPECT_TRUE(refused([](Hello &h) { h.magic ^= 1; })) << "magic";
    EXPECT_TRUE(refused([](Hello &h) { h.version = kProtocolVersion + 1; })) << "version";
    EXPECT_TRUE(refused([](Hello &h) { h.pdata_len = kConnectPdataMax + 1; })) << "pdata_len";
    EXPECT_TRUE(refused([](Hello &h) { h.role = 0; })) << "role 0";
    EXPECT_TRUE(refused([](Hello &h) { h.role = 3; })) << "role 3";
    EXPECT_FALSE(refused([](Hello &h) { h.pdata_len = kConnectPdataMax; })) << "the longest";
}

}  // namespace
}  // namespace rpma::tcp
