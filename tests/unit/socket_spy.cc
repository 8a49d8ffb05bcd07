#include "socket_spy.h"

#include <dlfcn.h>
#include <sys/socket.h>

namespace rpma::test {

void (*before_listen)(int fd) = nullptr;

namespace {
template <class F>
F real(const char *name) {
    return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}
}  // namespace

}  // namespace rpma::test

extern "C" int listen(int fd, int backlog) {
    using Fn = int (*)(int, int);
    static Fn next = rpma::test::real<Fn>("listen");
    if (rpma::test::before_listen) rpma::test::before_listen(fd);
    return next(fd, backlog);
}
