#include "provider/rc/frame_reader.h"

#include <errno.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace rpma::rc {

namespace {
constexpr std::chrono::microseconds kRestOfMessageWait{20};
}  // namespace

void FrameReader::io_end(ssize_t n, int err, const char *eof_why) noexcept {
    if (end_.why) return;  // the first cause
    end_.peer_end = ended_by_peer(n, err);
    end_.eof = n == 0;
    end_.why = n == 0 ? eof_why : strerror(err);
}

Step FrameReader::payload(ByteStream &io, int &budget, bool &done) {
    // bytes already staged
    size_t staged = tail_ - head_;
    if (staged && remaining_) {
        size_t take = static_cast<size_t>(std::min<uint64_t>(staged, remaining_));
        if (dst_ && !failed_) {
            RegionUse use(dst_region_.get());
            if (use.ok() || !dst_region_)
                std::memcpy(dst_, buf_.get() + head_, take);
            else
                failed_ = true;
        }
        if (dst_) dst_ += take;
        head_ += take;
        remaining_ -= take;
    }
    if (remaining_ == 0) {
        done = true;
        return Step::kContinue;
    }
    if (budget-- <= 0) return Step::kBlock;  // nothing staged is left: the stream has the rest
    // straight from the stream into the target, with the next header behind it
    head_ = tail_ = 0;
    iovec iov[2];
    size_t want = static_cast<size_t>(std::min<uint64_t>(remaining_, SIZE_MAX / 2));
    bool drop = !dst_ || failed_;
    iov[0].iov_base = drop ? g_discard : dst_;
    iov[0].iov_len = drop ? std::min(want, sizeof(g_discard)) : want;
    // Behind a large payload only the next header: the frame after it is likely large too, and
    // goes straight to its target as well instead of through the staging buffer.
    iov[1].iov_base = buf_.get();
    iov[1].iov_len = payload_len_ >= kDirectThreshold ? kHeaderSize : kStagingSize;
    ssize_t n;
    {
        RegionUse use(drop ? nullptr : dst_region_.get());
        if (!drop && dst_region_ && !use.ok()) {
            failed_ = true;
            return Step::kContinue;
        }
        n = io.readv(iov, 2);
    }
    // the rest: the peer publishes a large write every 64 KiB, microseconds apart
    if (n < 0 && errno == EAGAIN && io.await_input(kRestOfMessageWait)) return Step::kContinue;
    drained_ = n < 0 && errno == EAGAIN;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Step::kBlock;
    if (n <= 0) {
        io_end(n, errno, "the peer closed the connection mid-message");
        return Step::kFatal;
    }
    size_t got = static_cast<size_t>(n);
    drained_ = got < iov[0].iov_len + iov[1].iov_len;
    size_t into_dst = std::min(got, iov[0].iov_len);
    if (dst_) dst_ += into_dst;
    remaining_ -= into_dst;
    tail_ = got - into_dst;
    done = remaining_ == 0;
    return Step::kContinue;
}

Step FrameReader::fill(ByteStream &io, int &budget) {
    if (head_ > 0) {
        std::memmove(buf_.get(), buf_.get() + head_, tail_ - head_);
        tail_ -= head_;
        head_ = 0;
    }
    size_t room = kStagingSize - tail_;
    // After a large payload (read directly) only the rest of the header: its payload, likely
    // large as well, then goes straight to its target rather than through a memcpy.
    if (payload_len_ >= kDirectThreshold && tail_ < kHeaderSize) room = kHeaderSize - tail_;
    iovec into{buf_.get() + tail_, room};
    ssize_t n = io.readv(&into, 1);
    drained_ = n < 0 && errno == EAGAIN;
    if (n > 0) {
        tail_ += static_cast<size_t>(n);
        // A short read drained the stream: after these frames, stop rather than pay for an
        // EAGAIN; what arrives after that read brings a new edge.
        drained_ = static_cast<size_t>(n) < room;
        if (drained_) budget = 0;
        return Step::kContinue;
    }
    if (n < 0 && errno == EINTR) return Step::kContinue;
    if (n < 0 && errno == EAGAIN) return Step::kBlock;
    io_end(n, errno, "the peer closed the connection without a disconnect");
    return Step::kFatal;
}

}  // namespace rpma::rc
