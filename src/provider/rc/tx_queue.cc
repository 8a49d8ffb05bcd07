#include "provider/rc/tx_queue.h"

#include <algorithm>
#include <cerrno>

#include "provider/rc/opcode.h"
#include "provider/rc/qp_internal.h"

namespace rpma::rc {

void TxQueue::push(TxItem item) {
    if (item.guard) ++data_items_;
    q_.push_back(std::move(item));
}

void TxQueue::drop_region(TxItem &it) noexcept {
    it.guard.reset();
    --data_items_;
}

void TxQueue::insert_before_disconnect(TxItem item) {
    auto pos = std::find_if(q_.begin(), q_.end(), [](const TxItem &t) {
        return t.hdr.op == static_cast<uint8_t>(Op::kDisconnect);
    });
    if (pos == q_.begin() && off_ > 0) ++pos;
    q_.insert(pos, std::move(item));
}

TxQueue::Sent TxQueue::send(ByteStream &io) {
    while (!q_.empty()) {
        iovec iov[kMaxIov];
        Region *held[kMaxIov];
        int nheld = 0;
        TxItem *dead = nullptr;
        int niov = gather(iov, held, &nheld, &dead);
        ssize_t n = -1;
        int err = 0;
        if (!dead) {
            n = io.writev(iov, niov);
            err = errno;
        }
        for (int i = 0; i < nheld; ++i) held[i]->release();
        if (dead) {
            dead_ = dead;
            return Sent::kDead;
        }
        if (n < 0 && err == EINTR) continue;
        if (n < 0 && err == EAGAIN) return Sent::kBlocked;
        if (n < 0) {
            err_ = err;
            return Sent::kError;
        }
        consume(static_cast<size_t>(n));
    }
    return Sent::kAll;
}

int TxQueue::gather(iovec *iov, Region **held, int *nheld, TxItem **dead) {
    int niov = 0;
    size_t off = off_;
    size_t room = kSendChunk;
    for (auto it = q_.begin(); it != q_.end() && niov + 2 <= kMaxIov && room > 0; ++it) {
        if (off < kHeaderSize) {
            size_t n = std::min(kHeaderSize - off, room);
            iov[niov++] = {reinterpret_cast<char *>(&it->hdr) + off, n};
            room -= n;
            if (n < kHeaderSize - off) break;
            off = 0;
        } else {
            off -= kHeaderSize;
        }
        if (it->len > off) {
            size_t left = it->len - off;
            size_t n = std::min(left, room);
            if (n == 0) break;
            if (it->zero_fill) {
                n = std::min(n, sizeof(g_zero));
                iov[niov++] = {const_cast<char *>(g_zero), n};
            } else {
                if (it->guard) {
                    // Held across the send: deregistration waits for it, and after it no byte
                    // of the region is read.
                    if (!it->guard->acquire()) {
                        *dead = &*it;
                        break;
                    }
                    held[(*nheld)++] = it->guard.get();
                }
                iov[niov++] = {const_cast<char *>(it->data) + off, n};
            }
            room -= n;
            if (n < left) break;
        }
        off = 0;
    }
    return niov;
}

void TxQueue::consume(size_t n) {
    while (n > 0) {
        size_t left = kHeaderSize + q_.front().len - off_;
        if (n < left) {
            off_ += n;
            return;
        }
        n -= left;
        const TxItem &it = q_.front();
        if (is_request(it.hdr.op) &&
            ((it.hdr.flags & kAckRequested) || it.hdr.op == static_cast<uint8_t>(Op::kRead)))
            answer_due_ = it.seq;  // its ACK or its data will come back on this stream
        if (it.guard) --data_items_;
        q_.pop_front();
        off_ = 0;
    }
}

}  // namespace rpma::rc
