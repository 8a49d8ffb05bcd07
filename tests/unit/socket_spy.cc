#include "socket_spy.h"

#include <dlfcn.h>
#include <sys/socket.h>

#include <cerrno>

namespace rpma::test {

void (*before_listen)(int fd) = nullptr;
std::atomic<bool> count_emfile{false};
std::atomic<long> emfile_accepts{0};

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

extern "C" int accept4(int fd, sockaddr *addr, socklen_t *len, int flags) {
    using Fn = int (*)(int, sockaddr *, socklen_t *, int);
    static Fn next = rpma::test::real<Fn>("accept4");
    int r = next(fd, addr, len, flags);
    if (r < 0 && errno == EMFILE && rpma::test::count_emfile.load())
        rpma::test::emfile_accepts.fetch_add(1);
    return r;
}
