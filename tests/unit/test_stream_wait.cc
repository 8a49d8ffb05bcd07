// rc::Stream::wait (docs/rc-rebuild.md, step b1): "I am about to sleep for `want`". Each stream
// says what to poll and whether to sleep at all: `ready` when what was wanted came before the
// wait, and after the wait the peer's write makes the fd poll readable. Deterministic: every
// look at an fd is a poll with no timeout.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "../support/mem_stream.h"
#include "../support/socket_pair.h"
#include "common/fd.h"
#include "provider/rc/stream.h"
#include "provider/shm/segment.h"
#include "provider/shm/shm_stream.h"
#include "provider/tcp/socket_stream.h"

namespace rpma {
namespace {

// What the fd polls for right now (0: nothing), without waiting.
short polls(int fd, short events) {
    pollfd p{fd, events, 0};
    return ::poll(&p, 1, 0) == 1 ? p.revents : 0;
}

ssize_t put(rc::Stream &s, const char *text, size_t n) {
    iovec v{const_cast<char *>(text), n};
    return s.writev(&v, 1);
}

ssize_t take(rc::Stream &s, char *b, size_t n) {
    iovec v{b, n};
    return s.readv(&v, 1);
}

// ---- the in-memory pipe: no fd, only `ready` ----

TEST(StreamWaitMem, ReadyOnlyWhenInputOrTheEndCameBeforeTheWait) {
    auto ab = std::make_shared<rc::memio::Channel>(), ba = std::make_shared<rc::memio::Channel>();
    rc::memio::MemStream a(ba, ab), b(ab, ba);
    rc::Stream::Wait w = b.wait(EPOLLIN);
    EXPECT_EQ(w.fd, -1);
    EXPECT_TRUE(w.cheap);
    EXPECT_FALSE(w.ready);
    ASSERT_EQ(put(a, "hi", 2), 2);
    EXPECT_TRUE(b.wait(EPOLLIN).ready);
    char buf[8];
    ASSERT_EQ(take(b, buf, sizeof(buf)), 2);
    EXPECT_FALSE(b.wait(EPOLLIN).ready);
    a.shutdown(SHUT_WR);
    EXPECT_TRUE(b.wait(EPOLLIN).ready);   // the end is readiness too
    EXPECT_TRUE(b.wait(EPOLLOUT).ready);  // room in the pipe
}

// ---- a socket: its own fd, level-triggered ----

class StreamWaitSocket : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_TRUE(test::socket_pair(&ours_, &peer_)); }
    Fd ours_, peer_;
    tcp::SocketStream stream_{&ours_};
    tcp::SocketStream peer_stream_{&peer_};
};

TEST_F(StreamWaitSocket, WaitReturnsItsFdAndTheWantedEvents) {
    rc::Stream::Wait w = stream_.wait(EPOLLIN);
    EXPECT_EQ(w.fd, ours_.get());
    EXPECT_EQ(w.events, static_cast<uint32_t>(EPOLLIN));
    EXPECT_FALSE(w.ready);  // a socket never looks: polling its fd does
    EXPECT_FALSE(w.cheap);  // a read that finds nothing is a recvmsg
    w = stream_.wait(EPOLLIN | EPOLLOUT);
    EXPECT_EQ(w.events, static_cast<uint32_t>(EPOLLIN | EPOLLOUT));
    EXPECT_TRUE(polls(w.fd, POLLOUT) & POLLOUT);
}

TEST_F(StreamWaitSocket, APeerWriteAfterTheWaitMakesTheFdReadable) {
    rc::Stream::Wait w = stream_.wait(EPOLLIN);
    EXPECT_EQ(polls(w.fd, POLLIN), 0);
    ASSERT_EQ(put(peer_stream_, "abc", 3), 3);
    EXPECT_TRUE(polls(w.fd, POLLIN) & POLLIN);
    char b[8];
    EXPECT_EQ(take(stream_, b, sizeof(b)), 3);
    EXPECT_EQ(polls(w.fd, POLLIN), 0);
}

TEST_F(StreamWaitSocket, InputBeforeTheWaitPollsReadableAtOnce) {
    ASSERT_EQ(put(peer_stream_, "abc", 3), 3);
    rc::Stream::Wait w = stream_.wait(EPOLLIN);
    EXPECT_TRUE(polls(w.fd, POLLIN) & POLLIN);  // level-triggered: the sleep ends at once
}

// ---- shm: the doorbell, the ring's flags, and `ready` ----

constexpr uint32_t kRing = shm::Segment::kMinRing;

uint64_t rings(int fd) {
    uint64_t v = 0;
    return ::read(fd, &v, sizeof(v)) == sizeof(v) ? v : 0;
}

// One RC stream over a memfd segment, client and server, each with its eventfd doorbell (as
// test_shm_ring.cc's fixture, without the join stream).
class StreamWaitShm : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string why;
        ASSERT_TRUE(seg_.create(kRing, &why)) << why;
        for (Fd *f : {&cbell_, &sbell_}) {
            f->reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
            ASSERT_TRUE(f->valid());
        }
        client_ = std::make_unique<shm::ShmStream>(seg_.ring(shm::RingId::kMainToServer),
                                                   seg_.ring(shm::RingId::kMainToClient),
                                                   cbell_.get(), sbell_.get());
        server_ = std::make_unique<shm::ShmStream>(seg_.ring(shm::RingId::kMainToClient),
                                                   seg_.ring(shm::RingId::kMainToServer),
                                                   sbell_.get(), cbell_.get());
        // a fresh segment starts with every side asleep: one exchange each way clears that
        char b[4] = {};
        ASSERT_EQ(put(*client_, b, 1), 1);
        ASSERT_EQ(take(*server_, b, sizeof(b)), 1);
        ASSERT_EQ(put(*server_, b, 1), 1);
        ASSERT_EQ(take(*client_, b, sizeof(b)), 1);
        rings(cbell_.get());
        rings(sbell_.get());
    }
    shm::RingCtl *to_server() { return seg_.ring(shm::RingId::kMainToServer).ctl; }

    shm::Segment seg_;
    Fd cbell_, sbell_;
    std::unique_ptr<shm::ShmStream> client_, server_;
};

TEST_F(StreamWaitShm, WaitReturnsTheDoorbellAndAsksThePeerToRingIt) {
    to_server()->sleeping.store(shm::kNoBell);
    rc::Stream::Wait w = server_->wait(EPOLLIN);
    EXPECT_EQ(w.fd, sbell_.get());
    EXPECT_EQ(w.events, static_cast<uint32_t>(EPOLLIN));
    EXPECT_TRUE(w.cheap);
    EXPECT_FALSE(w.ready);
    EXPECT_EQ(to_server()->sleeping.load(), static_cast<uint32_t>(shm::kBell));
    EXPECT_EQ(polls(w.fd, POLLIN), 0);
    ASSERT_EQ(put(*client_, "abc", 3), 3);
    EXPECT_TRUE(polls(w.fd, POLLIN) & POLLIN);
}

TEST_F(StreamWaitShm, ReadyWhenInputCameBeforeTheWait) {
    to_server()->sleeping.store(shm::kNoBell);  // a spinner: the writer rings nobody
    ASSERT_EQ(put(*client_, "abc", 3), 3);
    EXPECT_EQ(polls(sbell_.get(), POLLIN), 0);
    EXPECT_TRUE(server_->wait(EPOLLIN).ready);  // the look after the flag sees it
    char b[8];
    EXPECT_EQ(take(*server_, b, sizeof(b)), 3);
    EXPECT_FALSE(server_->wait(EPOLLIN).ready);
}

TEST_F(StreamWaitShm, StaleDoorbellCountsAreAbsorbed) {
    // the reader found the ring empty and asked for a bell; the write rings it, and the reader
    // reads the input without ever looking at its doorbell
    char b[8];
    ASSERT_EQ(take(*server_, b, sizeof(b)), -1);
    ASSERT_EQ(put(*client_, "abc", 3), 3);
    ASSERT_EQ(take(*server_, b, sizeof(b)), 3);
    EXPECT_TRUE(polls(sbell_.get(), POLLIN) & POLLIN);  // the stale count
    rc::Stream::Wait w = server_->wait(EPOLLIN);
    EXPECT_FALSE(w.ready);
    EXPECT_EQ(polls(w.fd, POLLIN), 0);  // the sleep would not end on it
    ASSERT_EQ(put(*client_, "d", 1), 1);
    EXPECT_TRUE(polls(w.fd, POLLIN) & POLLIN);
}

TEST_F(StreamWaitShm, ThePeersEndIsReady) {
    client_->shutdown(SHUT_WR);
    EXPECT_TRUE(server_->wait(EPOLLIN).ready);
}

TEST_F(StreamWaitShm, WaitingForRoomIsRungWhenThePeerReads) {
    char b[1024] = {};
    size_t total = 0;
    for (;;) {
        ssize_t w = put(*client_, b, sizeof(b));
        if (w < 0) break;
        total += static_cast<size_t>(w);
    }
    ASSERT_EQ(total, kRing);
    rings(cbell_.get());
    rc::Stream::Wait w = client_->wait(EPOLLOUT);
    EXPECT_EQ(w.fd, cbell_.get());
    EXPECT_EQ(w.events, static_cast<uint32_t>(EPOLLIN));  // a doorbell only ever reads
    EXPECT_FALSE(w.ready);
    EXPECT_EQ(polls(w.fd, POLLIN), 0);
    ASSERT_EQ(take(*server_, b, 1), 1);
    EXPECT_TRUE(polls(w.fd, POLLIN) & POLLIN);
    EXPECT_TRUE(client_->wait(EPOLLOUT).ready);
}

}  // namespace
}  // namespace rpma
