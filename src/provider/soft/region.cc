#include "provider/soft/region.h"

#include <thread>

namespace rpma {

bool Region::acquire() noexcept {
    users_.fetch_add(1);
    if (dead_.load()) {
        users_.fetch_sub(1);
        return false;
    }
    return true;
}

void Region::kill() noexcept {
    dead_.store(true);
    // A use lasts one memcpy or one system call on a non-blocking socket: short.
    while (users_.load() != 0) std::this_thread::yield();
}

}  // namespace rpma
