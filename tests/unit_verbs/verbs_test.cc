#include "verbs_test.h"

#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <mutex>

#include "common/log.h"

namespace rpma::test {

namespace {

struct Message {
    rpma_log_level level;
    std::string text;
};

std::mutex g_mu;
std::vector<Message> g_messages;

void capture(rpma_log_level level, const char *, const int, const char *, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    std::lock_guard lk(g_mu);
    g_messages.push_back({level, buf});
}

}  // namespace

void VerbsTest::SetUp() {
    fake::reset();
    {
        std::lock_guard lk(g_mu);
        g_messages.clear();
    }
    rpma::log::set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG);
    rpma::log::set_function(capture);
}

void VerbsTest::TearDown() {
    EXPECT_EQ(fake::alive(), "") << "fake rdma-core objects left alive; the log:\n" << logs();
    rpma::log::set_function(nullptr);
    rpma::log::set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_WARNING);
}

bool VerbsTest::logged(rpma_log_level level, const std::vector<std::string> &parts) {
    return logged_times(level, parts) > 0;
}

size_t VerbsTest::logged_times(rpma_log_level level, const std::vector<std::string> &parts) {
    std::lock_guard lk(g_mu);
    size_t n = 0;
    for (const Message &m : g_messages) {
        if (level != RPMA_LOG_DISABLED && m.level != level) continue;
        bool all = true;
        for (const std::string &p : parts) all = all && m.text.find(p) != std::string::npos;
        if (all) n++;
    }
    return n;
}

size_t VerbsTest::proc_self_entries(const char *dir) {
    std::filesystem::directory_iterator it(std::string("/proc/self/") + dir);
    return static_cast<size_t>(std::distance(it, std::filesystem::directory_iterator()));
}

size_t VerbsTest::log_count() {
    std::lock_guard lk(g_mu);
    return g_messages.size();
}

std::string VerbsTest::logs() {
    std::lock_guard lk(g_mu);
    std::string out;
    for (const Message &m : g_messages) out += std::to_string(m.level) + ": " + m.text + "\n";
    return out;
}

}  // namespace rpma::test
