// This process's id without a system call (getpid() is one, and the engine and the verbs domain
// ask on every post): cached, and refreshed in a forked child by a fork handler.
#pragma once

#include <sys/types.h>

namespace rpma {

pid_t this_process() noexcept;

}  // namespace rpma
