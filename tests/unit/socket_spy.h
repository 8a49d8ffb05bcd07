// The unit test binary's own listen() and accept4(), which the library linked into it calls
// instead of libc's: a test can look at the world at the moment a socket starts listening, and
// count how often a listener tried to accept. Off (plain pass-through) unless a test sets them.
#pragma once

#include <atomic>

namespace rpma::test {

// Called on the thread that calls listen(), before the socket listens. Set it only around
// calls that listen from the test's own thread.
extern void (*before_listen)(int fd);

// accept4 calls that failed with EMFILE, counted while count_emfile is set.
extern std::atomic<bool> count_emfile;
extern std::atomic<long> emfile_accepts;

}  // namespace rpma::test
