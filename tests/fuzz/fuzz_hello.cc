// libFuzzer target: the first bytes a listener reads from a new connection (the Hello).
#include <cstddef>
#include <cstdint>

#include "provider/soft/engine.h"
#include "provider/tcp/listener.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static rpma::Engine engine;  // idle
    rpma::tcp::Listener::fuzz_hello(&engine, data, size);
    return 0;
}
