// The input of one RC role under test (the completer, the responder): crafted frames go into an
// in-memory stream that the role reads, and what its CQ holds comes out in order.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "mem_stream.h"
#include "provider/rc/frame_reader.h"
#include "provider/soft/cq.h"

namespace rpma::rc::memio {

struct FrameInput {
    std::shared_ptr<Channel> in = std::make_shared<Channel>();
    std::shared_ptr<Channel> out = std::make_shared<Channel>();
    MemStream io{in, out};
    std::atomic<bool> disc{false};  // the peer's Disconnect came

    void bytes(const void *p, size_t n) {
        std::lock_guard lk(in->mu);
        auto *c = static_cast<const char *>(p);
        in->bytes.insert(in->bytes.end(), c, c + n);
    }
    size_t unread() {
        std::lock_guard lk(in->mu);
        return in->bytes.size();
    }
    // Reads until the stream has nothing left or the role stops.
    template <class Role>
    Step read(Role &role) {
        Step st;
        do {
            st = role.read(io, disc);
        } while (st == Step::kBlock && unread() > 0);
        return st;
    }
};

inline std::vector<ibv_wc> take_wcs(Cq &cq) {
    std::vector<ibv_wc> out;
    ibv_wc wc;
    int got = 0;
    while (cq.get_wc(1, &wc, &got) == 0 && got == 1) out.push_back(wc);
    return out;
}

}  // namespace rpma::rc::memio
