// libFuzzer target: arbitrary bytes from a peer on a tcp-provider stream. The first byte picks
// the parser: the responder (the peer's requests), the completer (answers to our requests) or
// the client's handshake (the server's reply). Every input must end in a clean state or LOST,
// never a crash or an access outside the registered region.
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

#include "hooks.h"
#include "provider/soft/cq.h"
#include "provider/soft/engine.h"
#include "provider/soft/mr_table.h"

namespace {

struct Target {
    rpma::Engine engine;  // idle: the hook registers nothing with it
    rpma::MrTable mrs;
    rpma::ComplChannel channel;
    rpma::Cq cq{&channel, false};
    rpma::FdQueue<rpma_conn_event> events;
    char *mem;
    Target() {
        // A fixed address and rkey (0x1000) so the fuzzer can find the region from the corpus.
        mem = static_cast<char *>(mmap(reinterpret_cast<void *>(0x10000000), 8192,
                                       PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0));
        if (mem == MAP_FAILED) __builtin_trap();
        // The region is the middle 4 KiB; the pages' other bytes are guards the parser must
        // never touch (checked below).
        mrs.add_with_rkey(mem + 2048, 4096, 0xff, 0x1000);
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static Target t;
    if (size < 1) return 0;
    rpma::fuzz::feed_frames(&t.engine, &t.mrs, &t.cq, &t.events, data[0] % 3, data + 1, size - 1);
    for (int i = 0; i < 2048; ++i)
        if (t.mem[i] != 0 || t.mem[6144 + i] != 0) __builtin_trap();  // guard bytes written
    return 0;
}
