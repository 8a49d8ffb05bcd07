// The fixture of every verbs provider unit test: fresh fakes, the library's messages captured
// (at every level), and at the end a check that no fake rdma-core object is left alive.
#pragma once

#include <gtest/gtest.h>
#include <librpma.h>

#include <string>
#include <vector>

#include "fake.h"

namespace rpma::test {

class VerbsTest : public ::testing::Test {
  protected:
    void SetUp() override;
    void TearDown() override;

    // True when some message of `level` (any level if RPMA_LOG_DISABLED) contains every part.
    static bool logged(rpma_log_level level, const std::vector<std::string> &parts);
    // How many messages of `level` contain every part.
    static size_t logged_times(rpma_log_level level, const std::vector<std::string> &parts);
    static bool logged_error(const std::string &a, const std::string &b = "") {
        return logged(RPMA_LOG_LEVEL_ERROR, {a, b});
    }
    static size_t log_count();  // messages so far
    // How many entries /proc/self/<dir> has now: "fd" the open descriptors, "task" the threads.
    static size_t proc_self_entries(const char *dir);
    static std::string logs();  // all messages, one a line, for failure output
};

}  // namespace rpma::test
