// Whether a thread of this process sleeps, for tests that must know an engine stopped polling.
#pragma once

#include <sys/types.h>

#include <fstream>
#include <iterator>
#include <string>

namespace rpma::test {

// The state letter of /proc/self/task/TID/stat ('S': asleep), '?' if unreadable.
inline char ThreadState(pid_t tid) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t end = stat.rfind(')');  // the name may hold spaces and parentheses
    return end == std::string::npos || end + 2 >= stat.size() ? '?' : stat[end + 2];
}

}  // namespace rpma::test
