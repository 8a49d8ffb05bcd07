// The unit test binary's own listen(), which the library linked into it calls instead of libc's:
// a test can look at the world at the moment a socket starts listening. Off (plain
// pass-through) unless a test sets it.
#pragma once

namespace rpma::test {

// Called on the thread that calls listen(), before the socket listens. Set it only around
// calls that listen from the test's own thread.
extern void (*before_listen)(int fd);

}  // namespace rpma::test
