// libFuzzer target: the first bytes a listener reads from a new connection (the Hello).
#include <cstddef>
#include <cstdint>

#include "hooks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rpma::fuzz::read_hello(data, size);
    return 0;
}
