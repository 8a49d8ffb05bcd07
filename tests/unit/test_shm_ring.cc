// The shm provider's rings without sockets (issue 11): two ShmStreams facing each other over one
// Segment, each with its eventfd doorbell, and the checks on what a peer hands over (the sealed
// memfd, the offer and its doorbells). The test plays the hostile peer by writing the ring's
// control blocks directly: nothing in them may be trusted.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "provider/rc/byte_stream.h"
#include "provider/shm/link.h"
#include "provider/shm/segment.h"
#include "provider/shm/shm_stream.h"

namespace rpma::shm {
namespace {

constexpr uint32_t kRing = Segment::kMinRing;  // small: the tests wrap it often

Fd make_eventfd() {
    return Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
}

// How often the eventfd was rung since the last look (0: not at all); reading resets it.
uint64_t rings(int fd) {
    uint64_t v = 0;
    return ::read(fd, &v, sizeof(v)) == sizeof(v) ? v : 0;
}

uint8_t pattern(uint64_t i) {
    return static_cast<uint8_t>((i * 131 + (i >> 8) * 7 + 1) & 0xff);
}

// A sealed memfd of `len` bytes with the given seals (0: none).
Fd make_memfd(size_t len, unsigned seals) {
    Fd fd(::memfd_create("rpma-shm-test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(len)), 0);
    if (seals) {
        EXPECT_EQ(::fcntl(fd.get(), F_ADD_SEALS, seals), 0);
    }
    return fd;
}

constexpr unsigned kAllSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// A client and a server stream of one RC stream (main or join) over one segment: the client
// writes kXToServer and reads kXToClient, the server the opposite. The fixture's own code
// plays the peer's ring writes where a test needs a hostile one.
class ShmRingTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string why;
        ASSERT_TRUE(seg_.create(kRing, &why)) << why;
        for (Fd *f : {&cmain_, &smain_, &cjoin_, &sjoin_}) {
            *f = make_eventfd();
            ASSERT_TRUE(f->valid());
        }
        client_ = std::make_unique<ShmStream>(seg_.ring(RingId::kMainToServer),
                                              seg_.ring(RingId::kMainToClient), cmain_.get(),
                                              smain_.get());
        server_ = std::make_unique<ShmStream>(seg_.ring(RingId::kMainToClient),
                                              seg_.ring(RingId::kMainToServer), smain_.get(),
                                              cmain_.get());
        cjoin_stream_ = std::make_unique<ShmStream>(seg_.ring(RingId::kJoinToServer),
                                                    seg_.ring(RingId::kJoinToClient), cjoin_.get(),
                                                    sjoin_.get());
        sjoin_stream_ = std::make_unique<ShmStream>(seg_.ring(RingId::kJoinToClient),
                                                    seg_.ring(RingId::kJoinToServer), sjoin_.get(),
                                                    cjoin_.get());
    }

    ssize_t write(ShmStream &s, const void *p, size_t n) {
        iovec v{const_cast<void *>(p), n};
        return s.writev(&v, 1);
    }
    ssize_t read(ShmStream &s, void *p, size_t n) {
        iovec v{p, n};
        return s.readv(&v, 1);
    }
    // Writes n bytes of the pattern from *pos on, in one call; returns what writev returned.
    ssize_t write_pattern(ShmStream &s, uint64_t *pos, size_t n) {
        std::vector<uint8_t> b(n);
        for (size_t i = 0; i < n; ++i) b[i] = pattern(*pos + i);
        ssize_t r = write(s, b.data(), n);
        if (r > 0) *pos += static_cast<uint64_t>(r);
        return r;
    }
    // Reads everything there is; checks it against the pattern from *pos on.
    size_t read_pattern(ShmStream &s, uint64_t *pos) {
        std::vector<uint8_t> b(2 * kRing);
        ssize_t r = read(s, b.data(), b.size());
        if (r <= 0) return 0;
        for (ssize_t i = 0; i < r; ++i) {
            EXPECT_EQ(b[i], pattern(*pos + i)) << "at byte " << *pos + i;
            if (b[i] != pattern(*pos + i)) break;
        }
        *pos += static_cast<uint64_t>(r);
        return static_cast<size_t>(r);
    }
    // Both rings' doorbells quiet, and the ring's sleeping flags as a fresh exchange leaves
    // them: the segment starts with every side asleep.
    void settle() {
        char b[16] = {};
        ASSERT_EQ(write(*client_, b, 1), 1);
        ASSERT_EQ(read(*server_, b, sizeof(b)), 1);
        ASSERT_EQ(write(*server_, b, 1), 1);
        ASSERT_EQ(read(*client_, b, sizeof(b)), 1);
        for (int fd : {cmain_.get(), smain_.get()}) rings(fd);
    }

    RingCtl *ctl(RingId id) { return seg_.ring(id).ctl; }

    Segment seg_;
    Fd cmain_, smain_, cjoin_, sjoin_;  // the doorbells: client's and server's, main and join
    std::unique_ptr<ShmStream> client_, server_, cjoin_stream_, sjoin_stream_;
};

// ---- bytes in order ----

TEST_F(ShmRingTest, BytesArriveInOrderAcrossTheWrapWithGatherAndScatter) {
    // Gathered writes of odd sizes and scattered reads of other odd sizes, many times round
    // the ring, so every wrap position is crossed inside an iovec and between two.
    const size_t wsizes[] = {1, 7, 1000, 333, 4095, 64, 2049};
    const size_t rsizes[] = {3, 1024, 5, 777, 4096, 13};
    uint64_t wpos = 0, rpos = 0;
    size_t wi = 0, ri = 0;
    while (rpos < 20 * kRing) {
        // three iovecs per write (one of them empty)
        size_t a = wsizes[wi++ % 7], b = wsizes[wi++ % 7];
        std::vector<uint8_t> x(a), y(b);
        for (size_t i = 0; i < a; ++i) x[i] = pattern(wpos + i);
        for (size_t i = 0; i < b; ++i) y[i] = pattern(wpos + a + i);
        iovec wv[3] = {{x.data(), a}, {nullptr, 0}, {y.data(), b}};
        ssize_t w = client_->writev(wv, 3);
        if (w < 0) {
            ASSERT_EQ(errno, EAGAIN);
        } else {
            ASSERT_LE(static_cast<size_t>(w), a + b);
            wpos += static_cast<uint64_t>(w);  // a partial write: the rest is written again
        }
        ASSERT_LE(wpos - rpos, kRing);  // the ring never holds more than its size
        // scattered into two buffers
        size_t p = rsizes[ri++ % 6], q = rsizes[ri++ % 6];
        std::vector<uint8_t> u(p), v(q);
        iovec rv[2] = {{u.data(), p}, {v.data(), q}};
        ssize_t r = server_->readv(rv, 2);
        if (r < 0) {
            ASSERT_EQ(errno, EAGAIN);
            continue;
        }
        ASSERT_EQ(static_cast<uint64_t>(r), std::min<uint64_t>(p + q, wpos - rpos));
        for (ssize_t i = 0; i < r; ++i) {
            uint8_t got = static_cast<size_t>(i) < p ? u[i] : v[i - p];
            ASSERT_EQ(got, pattern(rpos + i)) << "at byte " << rpos + i;
        }
        rpos += static_cast<uint64_t>(r);
    }
    EXPECT_EQ(ctl(RingId::kMainToServer)->head.load(), wpos);
    EXPECT_EQ(ctl(RingId::kMainToServer)->tail.load(), rpos);
}

TEST_F(ShmRingTest, AWriteStraddlingTheRingsEndComesOutWhole) {
    uint64_t wpos = 0, rpos = 0;
    ASSERT_EQ(write_pattern(*client_, &wpos, kRing - 5), kRing - 5);
    ASSERT_EQ(read_pattern(*server_, &rpos), kRing - 5);
    ASSERT_EQ(write_pattern(*client_, &wpos, 300), 300);  // 5 before the end, 295 after it
    ASSERT_EQ(read_pattern(*server_, &rpos), 300u);
    EXPECT_EQ(wpos, rpos);
}

TEST_F(ShmRingTest, TheFourRingsAreIndependent) {
    uint64_t a = 0, b = 1000, c = 2000, d = 3000, ra = 0, rb = 1000, rc_ = 2000, rd = 3000;
    ASSERT_EQ(write_pattern(*client_, &a, 100), 100);
    ASSERT_EQ(write_pattern(*server_, &b, 200), 200);
    ASSERT_EQ(write_pattern(*cjoin_stream_, &c, 300), 300);
    ASSERT_EQ(write_pattern(*sjoin_stream_, &d, 400), 400);
    EXPECT_EQ(read_pattern(*sjoin_stream_, &rc_), 300u);
    EXPECT_EQ(read_pattern(*cjoin_stream_, &rd), 400u);
    EXPECT_EQ(read_pattern(*client_, &rb), 200u);
    EXPECT_EQ(read_pattern(*server_, &ra), 100u);
}

// ---- a peer that stops consuming ----

TEST_F(ShmRingTest, AReaderThatStopsFillsTheRingThenWritesSayEagain) {
    settle();
    uint64_t wpos = 0, rpos = 0;
    size_t total = 0;
    for (int i = 0; i < 100; ++i) {
        ssize_t w = write_pattern(*client_, &wpos, 1000);
        if (w < 0) {
            ASSERT_EQ(errno, EAGAIN);
            break;
        }
        total += static_cast<size_t>(w);
    }
    // exactly the ring, no more: nothing grows, nothing blocks
    EXPECT_EQ(total, kRing);
    RingCtl *c = ctl(RingId::kMainToServer);
    const uint64_t head = c->head.load();
    EXPECT_EQ(head - c->tail.load(), kRing);
    for (int i = 0; i < 3; ++i) {
        char b = 0;
        errno = 0;
        EXPECT_EQ(write(*client_, &b, 1), -1);
        EXPECT_EQ(errno, EAGAIN);
    }
    EXPECT_EQ(c->head.load(), head);
    // the writer asked for a doorbell for space, and its wake-up will say EPOLLOUT
    EXPECT_EQ(c->waiting.load(), 1u);
    EXPECT_EQ(rings(cmain_.get()), 0u);

    // the reader frees a little: the writer's doorbell rings once, and the flag is taken
    char one[1];
    ASSERT_EQ(read(*server_, one, 1), 1);
    EXPECT_EQ(static_cast<uint8_t>(one[0]), pattern(0));
    rpos = 1;
    EXPECT_EQ(rings(cmain_.get()), 1u);
    EXPECT_EQ(c->waiting.load(), 0u);
    EXPECT_EQ(client_->woken(EPOLLIN) & EPOLLOUT, static_cast<uint32_t>(EPOLLOUT));
    ASSERT_EQ(read(*server_, one, 1), 1);  // nobody waits now: no doorbell
    rpos = 2;
    EXPECT_EQ(rings(cmain_.get()), 0u);

    // exactly the freed space can be written, and the bytes stay in order
    EXPECT_EQ(write_pattern(*client_, &wpos, 1000), 2);
    while (rpos < wpos) ASSERT_GT(read_pattern(*server_, &rpos), 0u);
    EXPECT_EQ(rpos, wpos);
}

// ---- doorbells ----

TEST_F(ShmRingTest, AReaderThatFoundTheRingEmptyIsRungByTheNextWrite) {
    settle();
    uint64_t wpos = 0, rpos = 0;
    char b[64];
    errno = 0;
    ASSERT_EQ(read(*server_, b, sizeof(b)), -1);
    ASSERT_EQ(errno, EAGAIN);
    EXPECT_EQ(ctl(RingId::kMainToServer)->sleeping.load(), 1u);
    ASSERT_EQ(write_pattern(*client_, &wpos, 10), 10);
    EXPECT_EQ(rings(smain_.get()), 1u);
    // the flag was taken: the next write makes no system call
    ASSERT_EQ(write_pattern(*client_, &wpos, 10), 10);
    EXPECT_EQ(rings(smain_.get()), 0u);
    // a reader that found input does not ask either
    EXPECT_EQ(read_pattern(*server_, &rpos), 20u);
    ASSERT_EQ(write_pattern(*client_, &wpos, 10), 10);
    EXPECT_EQ(rings(smain_.get()), 0u);
    EXPECT_EQ(read_pattern(*server_, &rpos), 10u);
    EXPECT_EQ(rings(cmain_.get()), 0u);  // the writer never asked for space
}

TEST_F(ShmRingTest, YieldedWithInputLeftRingsTheReadersOwnDoorbell) {
    settle();
    uint64_t wpos = 0, rpos = 0;
    ASSERT_EQ(write_pattern(*client_, &wpos, 100), 100);
    rings(smain_.get());
    char b[10];
    ASSERT_EQ(read(*server_, b, sizeof(b)), 10);
    rpos = 10;
    server_->yielded();
    EXPECT_EQ(rings(smain_.get()), 1u);  // as level-triggered epoll would come back
    EXPECT_EQ(ctl(RingId::kMainToServer)->sleeping.load(), 1u);
    EXPECT_EQ(read_pattern(*server_, &rpos), 90u);
    // nothing left: no doorbell of its own, but the flag for the peer's next write
    ctl(RingId::kMainToServer)->sleeping.store(0);
    server_->yielded();
    EXPECT_EQ(rings(smain_.get()), 0u);
    EXPECT_EQ(ctl(RingId::kMainToServer)->sleeping.load(), 1u);
}

TEST_F(ShmRingTest, ArmSaysWhetherInputIsThereAlready) {
    settle();
    uint64_t wpos = 0, rpos = 0;
    ctl(RingId::kMainToServer)->sleeping.store(0);
    EXPECT_FALSE(server_->arm());
    EXPECT_EQ(ctl(RingId::kMainToServer)->sleeping.load(), 1u);
    ASSERT_EQ(write_pattern(*client_, &wpos, 5), 5);
    EXPECT_EQ(rings(smain_.get()), 1u);
    EXPECT_TRUE(server_->arm());
    EXPECT_EQ(read_pattern(*server_, &rpos), 5u);
    EXPECT_FALSE(server_->arm());
}

TEST_F(ShmRingTest, APollerAsksOnlyForALateDoorbellThatComesIfItFallsBehind) {
    settle();
    uint64_t wpos = 0, rpos = 0;
    char b[64];
    server_->reader(rc::ByteStream::Reader::kPoller);
    errno = 0;
    ASSERT_EQ(read(*server_, b, sizeof(b)), -1);
    ASSERT_EQ(errno, EAGAIN);
    server_->yielded();
    server_->reader(rc::ByteStream::Reader::kWaiter);
    EXPECT_EQ(ctl(RingId::kMainToServer)->sleeping.load(), kBellIfIdle);
    // nobody takes the bytes: after the grace the doorbell goes after all, and the flag with it
    ASSERT_EQ(write_pattern(*client_, &wpos, 10), 10);
    EXPECT_EQ(rings(smain_.get()), 1u);
    EXPECT_EQ(ctl(RingId::kMainToServer)->sleeping.load(), kNoBell);
    EXPECT_EQ(read_pattern(*server_, &rpos), 10u);
    // a reader that is not a poller asks for the doorbell at once, as before
    ASSERT_EQ(read(*server_, b, sizeof(b)), -1);
    EXPECT_EQ(ctl(RingId::kMainToServer)->sleeping.load(), kBell);
}

TEST_F(ShmRingTest, ASpinningEngineAsksForNoDoorbellUntilItArms) {
    settle();
    uint64_t wpos = 0, rpos = 0;
    char b[64];
    server_->reader(rc::ByteStream::Reader::kSpinner);
    ASSERT_EQ(read(*server_, b, sizeof(b)), -1);
    ASSERT_EQ(errno, EAGAIN);
    server_->yielded();
    EXPECT_EQ(ctl(RingId::kMainToServer)->sleeping.load(), kNoBell);
    // the writer neither rings nor waits; the spinner finds the bytes by looking
    ASSERT_EQ(write_pattern(*client_, &wpos, 10), 10);
    EXPECT_EQ(rings(smain_.get()), 0u);
    EXPECT_EQ(server_->ready() & EPOLLIN, uint32_t{EPOLLIN});
    // a spinner that leaves input behind does not ring itself: it looks again
    ASSERT_EQ(read(*server_, b, 4), 4);
    rpos = 4;
    server_->yielded();
    EXPECT_EQ(rings(smain_.get()), 0u);
    EXPECT_EQ(read_pattern(*server_, &rpos), 6u);
    server_->reader(rc::ByteStream::Reader::kWaiter);
    // the spin ends: arm asks for the doorbell again, and the next write rings
    EXPECT_FALSE(server_->arm());
    EXPECT_EQ(ctl(RingId::kMainToServer)->sleeping.load(), kBell);
    ASSERT_EQ(write_pattern(*client_, &wpos, 10), 10);
    EXPECT_EQ(rings(smain_.get()), 1u);
}

TEST_F(ShmRingTest, AwaitInputSaysWhetherInputCameWithinTheLimit) {
    settle();
    uint64_t wpos = 0;
    ctl(RingId::kMainToServer)->sleeping.store(kBell);
    EXPECT_FALSE(server_->await_input(std::chrono::microseconds(50)));
    // while it looks the writer need not ring; the caller arms again afterwards
    EXPECT_EQ(ctl(RingId::kMainToServer)->sleeping.load(), kNoBell);
    ASSERT_EQ(write_pattern(*client_, &wpos, 3), 3);
    EXPECT_EQ(rings(smain_.get()), 0u);
    EXPECT_TRUE(server_->await_input(std::chrono::microseconds(50)));
    EXPECT_TRUE(server_->arm());
}

// A poller that keeps up takes each message within the writer's grace, so the writer never
// rings. Whether a poller makes the 2 us depends on the scheduler, not on this logic (the
// benchmarks measure that): here the grace is long and the two threads take turns by handshake,
// so the count is exact however loaded the machine is.
TEST_F(ShmRingTest, APollerThatKeepsUpCostsTheWriterNoDoorbell) {
    settle();
    client_->late_bell_grace(std::chrono::seconds(30));
    constexpr int kMsgs = 200;
    std::atomic<int> watching{0};  // the message the poller watches the empty ring for
    std::atomic<uint64_t> taken{0};
    std::atomic<bool> stop{false};
    std::thread poller([&] {
        uint64_t rpos = 0;
        server_->reader(rc::ByteStream::Reader::kPoller);
        for (int i = 1; i <= kMsgs && !stop.load(); ++i) {
            // it finds the ring empty and leaves, as a spinning rpma_cq_get_wc does: a late
            // doorbell is all it asks for
            EXPECT_EQ(read_pattern(*server_, &rpos), 0u);
            server_->yielded();
            watching.store(i);
            while (read_pattern(*server_, &rpos) == 0 && !stop.load()) {
            }
            taken.store(rpos);
        }
        server_->reader(rc::ByteStream::Reader::kWaiter);
    });
    uint64_t wpos = 0, rung = 0;
    for (int i = 1; i <= kMsgs; ++i) {
        while (watching.load() != i) std::this_thread::yield();
        ssize_t w = write_pattern(*client_, &wpos, 8);
        EXPECT_EQ(w, 8);
        if (w != 8) break;
        while (taken.load() != wpos) std::this_thread::yield();
        rung += rings(smain_.get());
    }
    stop = true;
    poller.join();
    EXPECT_EQ(wpos, 8u * kMsgs);
    EXPECT_EQ(rung, 0u);
}

// ---- hostile indices ----
// The peer writes the index it owns; the test does that by hand. The client's join input ring
// (kJoinToClient) is the last in the segment: a copy that ran past it would leave the mapping.

class ShmHostileTest : public ShmRingTest {
  protected:
    RingCtl *in() { return ctl(RingId::kJoinToClient); }   // read by cjoin_stream_
    RingCtl *out() { return ctl(RingId::kJoinToServer); }  // written by cjoin_stream_
    ShmStream &us() { return *cjoin_stream_; }
    ShmStream &peer() { return *sjoin_stream_; }

    void expect_read_eproto() {
        std::vector<char> b(4 * kRing, 'x');
        errno = 0;
        EXPECT_EQ(read(us(), b.data(), b.size()), -1);
        EXPECT_EQ(errno, EPROTO);
        EXPECT_EQ(b[0], 'x');  // not a byte was copied
        EXPECT_EQ(b[b.size() - 1], 'x');
    }
    void expect_write_eproto() {
        std::vector<char> b(4 * kRing, 'y');
        uint64_t head = out()->head.load();
        errno = 0;
        EXPECT_EQ(write(us(), b.data(), b.size()), -1);
        EXPECT_EQ(errno, EPROTO);
        EXPECT_EQ(out()->head.load(), head);  // nothing was written
    }
};

TEST_F(ShmHostileTest, AHeadBeyondWhatTheRingHoldsFailsTheRead) {
    uint64_t wpos = 0, rpos = 0;
    ASSERT_EQ(write_pattern(peer(), &wpos, 100), 100);
    ASSERT_EQ(read_pattern(us(), &rpos), 100u);
    for (uint64_t h :
         {rpos + kRing + 1, rpos + 2 * kRing, rpos + (uint64_t{1} << 40), ~uint64_t{0}}) {
        in()->head.store(h);
        expect_read_eproto();
    }
    // a head behind our tail: the peer takes back what we read
    in()->head.store(rpos - 1);
    expect_read_eproto();
    in()->head.store(0);
    expect_read_eproto();
    EXPECT_EQ(in()->tail.load(), rpos);  // our own index never moved
    // exactly a full ring is allowed: its bytes are garbage, but inside the ring
    in()->head.store(rpos + kRing);
    std::vector<char> b(4 * kRing);
    EXPECT_EQ(read(us(), b.data(), b.size()), static_cast<ssize_t>(kRing));
}

TEST_F(ShmHostileTest, ATailPastOurHeadOrMoreThanTheRingBehindFailsTheWrite) {
    uint64_t wpos = 0, rpos = 0;
    // two rings' worth through it: our head is past the ring's size
    for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(write_pattern(us(), &wpos, kRing), kRing);
        ASSERT_EQ(read_pattern(peer(), &rpos), kRing);
    }
    ASSERT_EQ(write_pattern(us(), &wpos, 10), 10);
    const uint64_t head = wpos, tail = out()->tail.load();
    ASSERT_EQ(head, 2 * uint64_t{kRing} + 10);
    // the peer claims to have read what we never wrote
    for (uint64_t t : {head + 1, head + kRing, ~uint64_t{0}}) {
        out()->tail.store(t);
        expect_write_eproto();
    }
    // the peer claims to lag more than the ring holds
    for (uint64_t t : {head - kRing - 1, uint64_t{0}}) {
        out()->tail.store(t);
        expect_write_eproto();
    }
    // an honest tail again: the stream goes on where it was
    out()->tail.store(tail);
    ASSERT_EQ(write_pattern(us(), &wpos, 10), 10);
    EXPECT_EQ(read_pattern(peer(), &rpos), 20u);
}

TEST_F(ShmHostileTest, ATailMovedBadlyWhileTheWriterFoundTheRingFullFailsTheWrite) {
    uint64_t wpos = 0;
    ASSERT_EQ(write_pattern(us(), &wpos, kRing), kRing);
    // full: a tail past the head is still refused, not taken as room
    out()->tail.store(wpos + 1);
    expect_write_eproto();
    out()->tail.store(0);
    char b = 0;
    errno = 0;
    EXPECT_EQ(write(us(), &b, 1), -1);
    EXPECT_EQ(errno, EAGAIN);
}

// ---- the end of a stream ----

TEST_F(ShmRingTest, ClosedEndsTheReadOnceTheRingIsDrained) {
    settle();
    uint64_t wpos = 0, rpos = 0;
    ASSERT_EQ(write_pattern(*client_, &wpos, 50), 50);
    rings(smain_.get());
    client_->shutdown(SHUT_WR);
    EXPECT_EQ(ctl(RingId::kMainToServer)->closed.load(), 1u);
    EXPECT_EQ(rings(smain_.get()), 1u);  // the peer is rung even though it never asked
    EXPECT_EQ(server_->woken(EPOLLIN) & EPOLLRDHUP, static_cast<uint32_t>(EPOLLRDHUP));
    // what was written before comes first, then the end
    EXPECT_EQ(read_pattern(*server_, &rpos), 50u);
    char b[8];
    EXPECT_EQ(read(*server_, b, sizeof(b)), 0);
    EXPECT_EQ(read(*server_, b, sizeof(b)), 0);
    // our side cannot write after its shutdown; the other way still works
    errno = 0;
    EXPECT_EQ(write(*client_, b, 1), -1);
    EXPECT_EQ(errno, EPIPE);
    uint64_t sw = 0, cr = 0;
    ASSERT_EQ(write_pattern(*server_, &sw, 30), 30);
    EXPECT_EQ(read_pattern(*client_, &cr), 30u);
}

TEST_F(ShmRingTest, APeerSettingClosedEndsOurReadAfterTheRest) {
    settle();
    uint64_t wpos = 0, rpos = 0;
    ASSERT_EQ(write_pattern(*client_, &wpos, 20), 20);
    ctl(RingId::kMainToServer)->closed.store(1);
    EXPECT_TRUE(server_->arm());
    EXPECT_EQ(read_pattern(*server_, &rpos), 20u);
    char b[8];
    EXPECT_EQ(read(*server_, b, sizeof(b)), 0);
    EXPECT_TRUE(server_->arm());  // the end is readiness too
}

TEST_F(ShmRingTest, ShutdownBothWaysEndsOurOwnReadAndRingsOurOwnDoorbell) {
    settle();
    uint64_t wpos = 0;
    ASSERT_EQ(write_pattern(*client_, &wpos, 20), 20);
    rings(smain_.get());
    server_->shutdown(SHUT_RDWR);
    EXPECT_EQ(rings(smain_.get()), 1u);
    EXPECT_EQ(rings(cmain_.get()), 1u);
    EXPECT_EQ(ctl(RingId::kMainToClient)->closed.load(), 1u);
    char b[8];
    EXPECT_EQ(read(*server_, b, sizeof(b)), 0);
    EXPECT_EQ(server_->woken(EPOLLIN) & EPOLLRDHUP, static_cast<uint32_t>(EPOLLRDHUP));
}

TEST_F(ShmRingTest, PeerGoneFailsWritesAndEndsReadsAfterTheRest) {
    settle();
    uint64_t wpos = 0, rpos = 0;
    ASSERT_EQ(write_pattern(*client_, &wpos, 40), 40);
    rings(smain_.get());
    server_->peer_gone();
    EXPECT_EQ(rings(smain_.get()), 1u);  // the engine hears of it through our own doorbell
    EXPECT_EQ(server_->woken(EPOLLIN) & EPOLLRDHUP, static_cast<uint32_t>(EPOLLRDHUP));
    char b[8];
    errno = 0;
    EXPECT_EQ(write(*server_, b, 1), -1);
    EXPECT_EQ(errno, EPIPE);
    EXPECT_EQ(read_pattern(*server_, &rpos), 40u);
    EXPECT_EQ(read(*server_, b, sizeof(b)), 0);
    EXPECT_TRUE(server_->arm());
}

// ---- Segment::attach: what the peer's memfd must be ----

TEST(ShmSegmentAttach, TakesASealedMemfdOfTheRightSizeAndSharesIt) {
    Segment mine, theirs;
    std::string why;
    ASSERT_TRUE(mine.create(kRing, &why)) << why;
    ASSERT_TRUE(theirs.attach(Fd(::fcntl(mine.fd(), F_DUPFD_CLOEXEC, 0)), kRing, &why)) << why;
    mine.ring(RingId::kJoinToClient).data[kRing - 1] = 'z';
    mine.ring(RingId::kMainToServer).ctl->head.store(77);
    EXPECT_EQ(theirs.ring(RingId::kJoinToClient).data[kRing - 1], 'z');
    EXPECT_EQ(theirs.ring(RingId::kMainToServer).ctl->head.load(), 77u);
}

TEST(ShmSegmentAttach, RefusesAnUnsealedMemfd) {
    Segment s;
    std::string why;
    EXPECT_FALSE(s.attach(make_memfd(Segment::bytes_for(kRing), 0), kRing, &why));
    EXPECT_NE(why.find("sealed"), std::string::npos) << why;
}

TEST(ShmSegmentAttach, RefusesAMemfdMissingASeal) {
    for (unsigned seals : {F_SEAL_GROW | F_SEAL_SEAL, F_SEAL_SHRINK | F_SEAL_SEAL,
                           F_SEAL_SHRINK | F_SEAL_GROW, F_SEAL_SEAL | F_SEAL_WRITE}) {
        Segment s;
        std::string why;
        EXPECT_FALSE(s.attach(make_memfd(Segment::bytes_for(kRing), seals), kRing, &why))
            << "seals " << seals;
        EXPECT_NE(why.find("sealed"), std::string::npos) << why;
    }
}

TEST(ShmSegmentAttach, RefusesAFileThatIsNoMemfd) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    Fd keep(p[1]);
    Segment s;
    std::string why;
    EXPECT_FALSE(s.attach(Fd(p[0]), kRing, &why));
    EXPECT_FALSE(why.empty());
}

TEST(ShmSegmentAttach, RefusesTheWrongSize) {
    for (size_t len : {Segment::bytes_for(kRing) - 4096, Segment::bytes_for(kRing) + 4096,
                       Segment::bytes_for(kRing) - 1, Segment::bytes_for(2 * kRing), size_t{0}}) {
        Segment s;
        std::string why;
        EXPECT_FALSE(s.attach(make_memfd(len, kAllSeals), kRing, &why)) << "size " << len;
        EXPECT_NE(why.find("size"), std::string::npos) << why;
    }
}

TEST(ShmSegmentAttach, RefusesABadRingSize) {
    for (uint32_t ring : {0u, 1u, 2048u, 4095u, 4097u, 3u * 4096u, Segment::kMaxRing * 2,
                          Segment::kMaxRing + 4096u, 0x80000000u}) {
        Segment s;
        std::string why;
        // a memfd sized as the bad ring size would need, where that is small enough to make
        size_t len = ring <= Segment::kMaxRing * 2 ? Segment::bytes_for(ring) : 4096;
        EXPECT_FALSE(s.attach(make_memfd(len, kAllSeals), ring, &why)) << "ring " << ring;
        EXPECT_NE(why.find("ring size"), std::string::npos) << why;
    }
    Segment c;
    std::string why;
    EXPECT_FALSE(c.create(4097, &why));
    EXPECT_FALSE(c.create(2048, &why));
    EXPECT_FALSE(c.create(Segment::kMaxRing * 2, &why));
}

// ---- Link::accept_offer and read_offer: what an offer must be ----

class ShmOfferTest : public ::testing::Test {
  protected:
    void SetUp() override {
        int sv[2];
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        ctl_.reset(sv[0]);  // SO_PEERCRED: our own pid and uid, which pass
        client_end_.reset(sv[1]);
        std::string why;
        client_seg_ = std::make_unique<Segment>();
        ASSERT_TRUE(client_seg_->create(kRing, &why)) << why;
        fds_[kMemfd].reset(::fcntl(client_seg_->fd(), F_DUPFD_CLOEXEC, 0));
        for (int i = kClientMain; i < kNumFds; ++i) {
            fds_[i] = make_eventfd();
            ASSERT_TRUE(fds_[i].valid());
        }
        offer_ = Offer{kOfferMagic, kOfferVersion, kNumFds, 0x1234, kRing, 0};
    }
    std::shared_ptr<Link> accept(std::string *why, int nfds = kNumFds) {
        return Link::accept_offer(std::move(ctl_), offer_, fds_, nfds, why);
    }

    Fd ctl_, client_end_;
    std::unique_ptr<Segment> client_seg_;  // the client's segment, whose memfd is offered
    Fd fds_[kNumFds];
    Offer offer_{};
};

TEST_F(ShmOfferTest, AGoodOfferIsTakenAndItsStreamsMeetTheClients) {
    int server_main = fds_[kServerMain].get(), client_main = fds_[kClientMain].get();
    std::string why;
    auto link = accept(&why);
    ASSERT_TRUE(link) << why;
    EXPECT_EQ(link->token(), 0x1234u);
    EXPECT_GE(link->ctl_fd(), 0);
    // the server's main stream over the link, the client's over its own segment
    Fd wake = link->take_wake(true);
    ASSERT_EQ(wake.get(), server_main);
    auto server = link->stream(true, wake.get());
    ShmStream client(client_seg_->ring(RingId::kMainToServer),
                     client_seg_->ring(RingId::kMainToClient), client_main, server_main);
    iovec v{const_cast<char *>("hello"), 5};
    ASSERT_EQ(client.writev(&v, 1), 5);
    EXPECT_EQ(rings(server_main), 1u);
    char b[8] = {};
    iovec r{b, sizeof(b)};
    ASSERT_EQ(server->readv(&r, 1), 5);
    EXPECT_STREQ(b, "hello");
    v = iovec{const_cast<char *>("olleh"), 5};
    ASSERT_EQ(server->writev(&v, 1), 5);
    EXPECT_EQ(rings(client_main), 1u);
    std::memset(b, 0, sizeof(b));
    ASSERT_EQ(client.readv(&r, 1), 5);
    EXPECT_STREQ(b, "olleh");
    link->peer_gone();
    errno = 0;
    EXPECT_EQ(server->writev(&v, 1), -1);
    EXPECT_EQ(errno, EPIPE);
    EXPECT_EQ(server->readv(&r, 1), 0);
}

TEST_F(ShmOfferTest, ADoorbellThatIsNoEventfdIsRefused) {
    for (int bad = kClientMain; bad < kNumFds; ++bad) {
        SetUp();
        int p[2];
        ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
        Fd keep(p[1]);
        fds_[bad].reset(p[0]);
        std::string why;
        EXPECT_FALSE(accept(&why)) << "doorbell " << bad;
        EXPECT_NE(why.find("eventfd"), std::string::npos) << why;
    }
    // a memfd where a doorbell belongs
    SetUp();
    fds_[kServerJoin] = make_memfd(4096, 0);
    std::string why;
    EXPECT_FALSE(accept(&why));
    EXPECT_NE(why.find("eventfd"), std::string::npos) << why;
}

TEST_F(ShmOfferTest, AMalformedOfferIsRefused) {
    auto refused = [&](const char *what) {
        std::string why;
        EXPECT_FALSE(accept(&why)) << what;
        EXPECT_NE(why.find("malformed"), std::string::npos) << what << ": " << why;
        SetUp();
    };
    offer_.magic = kOfferMagic ^ 1;
    refused("bad magic");
    offer_.version = kOfferVersion + 1;
    refused("bad version");
    offer_.version = 0;
    refused("version 0");
    offer_.nfds = kNumFds - 1;
    refused("nfds in the offer");
    offer_.nfds = kNumFds + 1;
    refused("nfds in the offer");
    {
        std::string why;
        EXPECT_FALSE(accept(&why, kNumFds - 1)) << "fewer descriptors came";
        EXPECT_NE(why.find("malformed"), std::string::npos) << why;
        SetUp();
    }
}

TEST_F(ShmOfferTest, AnOfferOfABadSegmentIsRefused) {
    std::string why;
    offer_.ring_size = kRing * 2;  // the memfd is sized for kRing
    EXPECT_FALSE(accept(&why));
    SetUp();
    offer_.ring_size = kRing + 1;
    EXPECT_FALSE(accept(&why));
    SetUp();
    fds_[kMemfd] = make_memfd(Segment::bytes_for(kRing), 0);  // unsealed
    EXPECT_FALSE(accept(&why));
    EXPECT_NE(why.find("sealed"), std::string::npos) << why;
}

TEST_F(ShmOfferTest, ReadOfferTakesOneWholeOfferAndRefusesOthers) {
    // sends `len` bytes of the offer with n descriptors (the memfd repeated)
    auto send = [&](size_t len, int n) {
        iovec iov{&offer_, len};
        alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 8)] = {};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        if (n) {
            msg.msg_control = cbuf;
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
            cmsghdr *cm = CMSG_FIRSTHDR(&msg);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
            std::vector<int> v(n, fds_[kClientMain].get());
            std::memcpy(CMSG_DATA(cm), v.data(), sizeof(int) * n);
        }
        ASSERT_EQ(::sendmsg(client_end_.get(), &msg, 0), static_cast<ssize_t>(len));
    };
    Offer o{};
    Fd got[kNumFds];
    int n = -1;
    std::string why;
    EXPECT_EQ(Link::read_offer(ctl_.get(), &o, got, &n, &why), 0);  // nothing yet
    send(sizeof(Offer), kNumFds);
    ASSERT_EQ(Link::read_offer(ctl_.get(), &o, got, &n, &why), 1) << why;
    EXPECT_EQ(n, kNumFds);
    EXPECT_EQ(o.token, 0x1234u);
    send(sizeof(Offer) - 1, kNumFds);  // short
    EXPECT_EQ(Link::read_offer(ctl_.get(), &o, got, &n, &why), -1);
    EXPECT_NE(why.find("malformed"), std::string::npos) << why;
    send(sizeof(Offer), kNumFds + 3);  // too many descriptors: all closed, none kept past five
    EXPECT_EQ(Link::read_offer(ctl_.get(), &o, got, &n, &why), -1);
    EXPECT_LE(n, kNumFds);
    client_end_.reset();
    why.clear();
    EXPECT_EQ(Link::read_offer(ctl_.get(), &o, got, &n, &why), -1);
    EXPECT_NE(why.find("closed"), std::string::npos) << why;
}

}  // namespace
}  // namespace rpma::shm
