// access(2) as the verbs provider's Device::stack_present sees it: the rdma_cm character device
// exists when a test says so (fake::set_stack_present); every other path goes to libc.
#include <unistd.h>

#include <cstring>

#include "fake_internal.h"

extern "C" int __real_access(const char *path, int mode);

extern "C" int __wrap_access(const char *path, int mode) {
    if (std::strcmp(path, "/dev/infiniband/rdma_cm") != 0) return __real_access(path, mode);
    if (rpma::fake::stack_present()) return 0;
    errno = ENOENT;
    return -1;
}
