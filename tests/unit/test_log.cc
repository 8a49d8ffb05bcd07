// Logging: thresholds, the user's function, the default function, environment variables.
#include <gtest/gtest.h>
#include <librpma.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"

namespace {

struct Record {
    rpma_log_level level;
    std::string file;
    int line;
    std::string func;
    std::string message;
};

std::mutex g_mutex;
std::vector<Record> g_records;

void capture(rpma_log_level level, const char *file_name, const int line_no,
             const char *function_name, const char *message_format, ...) {
    va_list ap;
    va_start(ap, message_format);
    char buf[8192];
    vsnprintf(buf, sizeof(buf), message_format, ap);
    va_end(ap);
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records.push_back(
        {level, file_name ? file_name : "", line_no, function_name ? function_name : "", buf});
}

class Log : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &saved_main_), 0);
        ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &saved_aux_), 0);
        std::lock_guard<std::mutex> lock(g_mutex);
        g_records.clear();
    }
    void TearDown() override {
        rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION);
        rpma_log_set_threshold(RPMA_LOG_THRESHOLD, saved_main_);
        rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, saved_aux_);
    }
    static std::vector<Record> records() {
        std::lock_guard<std::mutex> lock(g_mutex);
        return g_records;
    }
    static rpma_log_level main_threshold() {
        rpma_log_level l = RPMA_LOG_DISABLED;
        EXPECT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &l), 0);
        return l;
    }
    static rpma_log_level aux_threshold() {
        rpma_log_level l = RPMA_LOG_DISABLED;
        EXPECT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &l), 0);
        return l;
    }

    rpma_log_level saved_main_ = RPMA_LOG_DISABLED;
    rpma_log_level saved_aux_ = RPMA_LOG_DISABLED;
};

// Sets an environment variable for one scope and restores the previous state.
class ScopedEnv {
  public:
    ScopedEnv(const char *name, const char *value) : name_(name) {
        if (const char *old = std::getenv(name)) old_ = old;
        if (value)
            setenv(name, value, 1);
        else
            unsetenv(name);
    }
    ~ScopedEnv() {
        if (old_)
            setenv(name_, old_->c_str(), 1);
        else
            unsetenv(name_);
    }

  private:
    const char *name_;
    std::optional<std::string> old_;
};

// The thresholds the library starts with, given the environment this test runs in.
rpma_log_level expected_initial(const char *var, rpma_log_level fallback) {
    rpma_log_level l = fallback;
    if (const char *v = std::getenv(var)) rpma::log::parse_level(v, &l);
    return l;
}

TEST_F(Log, InitialThresholdsAreWarningAndDisabled) {
    // SetUp saved the values in force before any test changed them (every test restores them).
    EXPECT_EQ(saved_main_, expected_initial("RPMA_LOG_LEVEL", RPMA_LOG_LEVEL_WARNING));
    EXPECT_EQ(saved_aux_, expected_initial("RPMA_LOG_LEVEL_AUX", RPMA_LOG_DISABLED));
}

TEST_F(Log, SetThresholdEveryLevelRoundTrips) {
    for (int t : {RPMA_LOG_THRESHOLD, RPMA_LOG_THRESHOLD_AUX}) {
        for (int l = RPMA_LOG_DISABLED; l <= RPMA_LOG_LEVEL_DEBUG; l++) {
            ASSERT_EQ(rpma_log_set_threshold(static_cast<rpma_log_threshold>(t),
                                             static_cast<rpma_log_level>(l)),
                      0);
            rpma_log_level got = static_cast<rpma_log_level>(-7);
            ASSERT_EQ(rpma_log_get_threshold(static_cast<rpma_log_threshold>(t), &got), 0);
            EXPECT_EQ(got, l);
        }
    }
}

TEST_F(Log, SetThresholdInvalThresholdNotMainNorAux) {
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_ERROR), 0);
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_ERROR), 0);
    for (int t : {static_cast<int>(RPMA_LOG_THRESHOLD_MAX), -1, 3, 1000}) {
        EXPECT_EQ(rpma_log_set_threshold(static_cast<rpma_log_threshold>(t), RPMA_LOG_LEVEL_DEBUG),
                  RPMA_E_INVAL)
            << "threshold " << t;
    }
    EXPECT_EQ(main_threshold(), RPMA_LOG_LEVEL_ERROR);
    EXPECT_EQ(aux_threshold(), RPMA_LOG_LEVEL_ERROR);
}

TEST_F(Log, SetThresholdInvalLevelNotInEnum) {
    for (int t : {RPMA_LOG_THRESHOLD, RPMA_LOG_THRESHOLD_AUX}) {
        ASSERT_EQ(rpma_log_set_threshold(static_cast<rpma_log_threshold>(t), RPMA_LOG_LEVEL_INFO),
                  0);
        for (int l : {-2, 6, 100, -100000}) {
            EXPECT_EQ(rpma_log_set_threshold(static_cast<rpma_log_threshold>(t),
                                             static_cast<rpma_log_level>(l)),
                      RPMA_E_INVAL)
                << "level " << l;
        }
        rpma_log_level got;
        ASSERT_EQ(rpma_log_get_threshold(static_cast<rpma_log_threshold>(t), &got), 0);
        EXPECT_EQ(got, RPMA_LOG_LEVEL_INFO);
    }
}

// RPMA_E_AGAIN: upstream returns it when a concurrent setter wins a compare-and-swap. Our
// setters are plain atomic stores, so concurrent calls all succeed and the last one wins.
TEST_F(Log, SetThresholdConcurrentCallsAllSucceedNoAgain) {
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++) {
        threads.emplace_back([t, &failures] {
            for (int i = 0; i < 2000; i++) {
                auto level = static_cast<rpma_log_level>((t + i) % 7 - 1);
                if (rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, level) != 0) failures++;
            }
        });
    }
    for (auto &th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    rpma_log_level got = aux_threshold();
    EXPECT_GE(got, RPMA_LOG_DISABLED);
    EXPECT_LE(got, RPMA_LOG_LEVEL_DEBUG);
}

TEST_F(Log, GetThresholdInvalThresholdNotMainNorAux) {
    rpma_log_level got = RPMA_LOG_LEVEL_NOTICE;
    for (int t : {static_cast<int>(RPMA_LOG_THRESHOLD_MAX), -1, 42}) {
        EXPECT_EQ(rpma_log_get_threshold(static_cast<rpma_log_threshold>(t), &got), RPMA_E_INVAL);
    }
    EXPECT_EQ(got, RPMA_LOG_LEVEL_NOTICE);  // untouched on failure
}

TEST_F(Log, GetThresholdInvalLevelNull) {
    EXPECT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, nullptr), RPMA_E_INVAL);
    EXPECT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, nullptr), RPMA_E_INVAL);
}

TEST_F(Log, SetFunctionSucceeds) {
    EXPECT_EQ(rpma_log_set_function(capture), 0);
    EXPECT_EQ(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION), 0);
}

TEST_F(Log, CustomFunctionReceivesLevelFileLineFuncAndFormattedMessage) {
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG), 0);
    ASSERT_EQ(rpma_log_set_function(capture), 0);
    const int line = __LINE__ + 1;
    RPMA_LOG_INFO("value %d, text '%s', hex %#x", 42, "abc", 255u);
    auto recs = records();
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_EQ(recs[0].level, RPMA_LOG_LEVEL_INFO);
    EXPECT_NE(recs[0].file.find("test_log.cc"), std::string::npos) << recs[0].file;
    EXPECT_EQ(recs[0].line, line);
    EXPECT_EQ(recs[0].func, "TestBody");
    EXPECT_EQ(recs[0].message, "value 42, text 'abc', hex 0xff");
}

TEST_F(Log, CustomFunctionGetsEveryLevelTagged) {
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG), 0);
    ASSERT_EQ(rpma_log_set_function(capture), 0);
    RPMA_LOG_FATAL("f");
    RPMA_LOG_ERROR("e");
    RPMA_LOG_WARNING("w");
    RPMA_LOG_NOTICE("n");
    RPMA_LOG_INFO("i");
    RPMA_LOG_DEBUG("d");
    auto recs = records();
    ASSERT_EQ(recs.size(), 6u);
    const char *msgs[] = {"f", "e", "w", "n", "i", "d"};
    for (int i = 0; i < 6; i++) {
        EXPECT_EQ(recs[i].level, static_cast<rpma_log_level>(i));
        EXPECT_EQ(recs[i].message, msgs[i]);
    }
}

TEST_F(Log, MainThresholdFiltersBeforeTheFunction) {
    ASSERT_EQ(rpma_log_set_function(capture), 0);
    for (int threshold = RPMA_LOG_DISABLED; threshold <= RPMA_LOG_LEVEL_DEBUG; threshold++) {
        {
            std::lock_guard<std::mutex> lock(g_mutex);
            g_records.clear();
        }
        ASSERT_EQ(
            rpma_log_set_threshold(RPMA_LOG_THRESHOLD, static_cast<rpma_log_level>(threshold)), 0);
        RPMA_LOG_FATAL("0");
        RPMA_LOG_ERROR("1");
        RPMA_LOG_WARNING("2");
        RPMA_LOG_NOTICE("3");
        RPMA_LOG_INFO("4");
        RPMA_LOG_DEBUG("5");
        auto recs = records();
        ASSERT_EQ(static_cast<int>(recs.size()), threshold + 1) << "threshold " << threshold;
        for (const auto &r : recs) EXPECT_LE(r.level, threshold);
    }
}

TEST_F(Log, EnabledMatchesMainThreshold) {
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_NOTICE), 0);
    EXPECT_TRUE(rpma::log::enabled(RPMA_LOG_LEVEL_FATAL));
    EXPECT_TRUE(rpma::log::enabled(RPMA_LOG_LEVEL_NOTICE));
    EXPECT_FALSE(rpma::log::enabled(RPMA_LOG_LEVEL_INFO));
    EXPECT_FALSE(rpma::log::enabled(RPMA_LOG_DISABLED));  // not a message level
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_DISABLED), 0);
    EXPECT_FALSE(rpma::log::enabled(RPMA_LOG_LEVEL_FATAL));
}

TEST_F(Log, LongMessageIsDeliveredWhole) {
    ASSERT_EQ(rpma_log_set_function(capture), 0);
    std::string big(5000, 'x');
    big += "END";
    RPMA_LOG_ERROR("%s", big.c_str());
    auto recs = records();
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_EQ(recs[0].message, big);
}

TEST_F(Log, NullFunctionRestoresDefault) {
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG), 0);
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_DEBUG), 0);
    ASSERT_EQ(rpma_log_set_function(capture), 0);
    testing::internal::CaptureStderr();
    RPMA_LOG_ERROR("to the custom function");
    ASSERT_EQ(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION), 0);
    RPMA_LOG_ERROR("to the default function");
    std::string err = testing::internal::GetCapturedStderr();
    auto recs = records();
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_EQ(recs[0].message, "to the custom function");
    EXPECT_EQ(err.find("to the custom function"), std::string::npos) << err;
    EXPECT_NE(err.find("to the default function"), std::string::npos) << err;
}

TEST_F(Log, DefaultFunctionWritesStderrLineAtOrBelowAux) {
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG), 0);
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_WARNING), 0);
    testing::internal::CaptureStderr();
    const int line = __LINE__ + 1;
    RPMA_LOG_WARNING("disk %s is %d%% full", "sda", 93);
    RPMA_LOG_INFO("below the aux threshold");
    std::string err = testing::internal::GetCapturedStderr();

    // "<date> <time>.<usec> [<tid>] WARNING test_log.cc:<line> TestBody(): <message>\n"
    std::regex re(
        "^\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}\\.\\d{6} \\[\\d+\\] WARNING "
        "test_log\\.cc:" +
        std::to_string(line) + " TestBody\\(\\): disk sda is 93% full\n$");
    EXPECT_TRUE(std::regex_match(err, re)) << err;
    EXPECT_EQ(err.find("below the aux threshold"), std::string::npos);
}

TEST_F(Log, DefaultFunctionSilentOnStderrWhenAuxDisabled) {
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG), 0);
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_DISABLED), 0);
    testing::internal::CaptureStderr();
    RPMA_LOG_FATAL("syslog only");
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(err, "");
}

TEST_F(Log, DefaultFunctionMainThresholdAppliesBeforeAux) {
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_ERROR), 0);
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_DEBUG), 0);
    testing::internal::CaptureStderr();
    RPMA_LOG_WARNING("dropped by the main threshold");
    RPMA_LOG_ERROR("kept");
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(err.find("dropped"), std::string::npos) << err;
    EXPECT_NE(err.find("ERROR"), std::string::npos) << err;
    EXPECT_NE(err.find("kept"), std::string::npos) << err;
}

TEST_F(Log, DefaultFunctionWithoutFileInfo) {
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_DEBUG), 0);
    testing::internal::CaptureStderr();
    rpma::log::default_function(RPMA_LOG_LEVEL_NOTICE, nullptr, 0, nullptr, "n=%d", 7);
    std::string err = testing::internal::GetCapturedStderr();
    std::regex re("^\\S+ \\S+ \\[\\d+\\] NOTICE n=7\n$");
    EXPECT_TRUE(std::regex_match(err, re)) << err;
}

TEST(LogParse, Numbers) {
    for (int l = -1; l <= 5; l++) {
        rpma_log_level got = static_cast<rpma_log_level>(-9);
        ASSERT_TRUE(rpma::log::parse_level(std::to_string(l).c_str(), &got)) << l;
        EXPECT_EQ(got, l);
    }
    rpma_log_level got;
    ASSERT_TRUE(rpma::log::parse_level(" 4 ", &got));
    EXPECT_EQ(got, RPMA_LOG_LEVEL_INFO);
}

TEST(LogParse, Names) {
    const struct {
        const char *text;
        rpma_log_level level;
    } cases[] = {
        {"disabled", RPMA_LOG_DISABLED},
        {"fatal", RPMA_LOG_LEVEL_FATAL},
        {"error", RPMA_LOG_LEVEL_ERROR},
        {"warning", RPMA_LOG_LEVEL_WARNING},
        {"notice", RPMA_LOG_LEVEL_NOTICE},
        {"info", RPMA_LOG_LEVEL_INFO},
        {"debug", RPMA_LOG_LEVEL_DEBUG},
        {"DEBUG", RPMA_LOG_LEVEL_DEBUG},
        {"Warning", RPMA_LOG_LEVEL_WARNING},
        {"RPMA_LOG_LEVEL_NOTICE", RPMA_LOG_LEVEL_NOTICE},
        {"rpma_log_level_error", RPMA_LOG_LEVEL_ERROR},
        {"RPMA_LOG_DISABLED", RPMA_LOG_DISABLED},
        {"  info\n", RPMA_LOG_LEVEL_INFO},
    };
    for (const auto &c : cases) {
        rpma_log_level got = static_cast<rpma_log_level>(-9);
        ASSERT_TRUE(rpma::log::parse_level(c.text, &got)) << c.text;
        EXPECT_EQ(got, c.level) << c.text;
    }
}

TEST(LogParse, RejectsGarbageAndLeavesOutputAlone) {
    for (const char *text : {"", "   ", "6", "-2", "10", "3x", "x3", "warn", "debugging",
                             "RPMA_LOG_LEVEL_", "99999999999999999999", "1.5", "RPMA_LOG_INFO_X"}) {
        rpma_log_level got = RPMA_LOG_LEVEL_NOTICE;
        EXPECT_FALSE(rpma::log::parse_level(text, &got)) << '"' << text << '"';
        EXPECT_EQ(got, RPMA_LOG_LEVEL_NOTICE) << text;
    }
    rpma_log_level got = RPMA_LOG_LEVEL_NOTICE;
    EXPECT_FALSE(rpma::log::parse_level(nullptr, &got));
}

TEST_F(Log, EnvironmentSetsBothThresholds) {
    ScopedEnv main_env("RPMA_LOG_LEVEL", "debug");
    ScopedEnv aux_env("RPMA_LOG_LEVEL_AUX", "2");
    rpma::log::load_env_thresholds();
    EXPECT_EQ(main_threshold(), RPMA_LOG_LEVEL_DEBUG);
    EXPECT_EQ(aux_threshold(), RPMA_LOG_LEVEL_WARNING);
}

TEST_F(Log, EnvironmentUnsetKeepsThresholds) {
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_FATAL), 0);
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_INFO), 0);
    ScopedEnv main_env("RPMA_LOG_LEVEL", nullptr);
    ScopedEnv aux_env("RPMA_LOG_LEVEL_AUX", nullptr);
    rpma::log::load_env_thresholds();
    EXPECT_EQ(main_threshold(), RPMA_LOG_LEVEL_FATAL);
    EXPECT_EQ(aux_threshold(), RPMA_LOG_LEVEL_INFO);
}

TEST_F(Log, EnvironmentInvalidValueIsIgnoredWithAWarning) {
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_ERROR), 0);
    ScopedEnv main_env("RPMA_LOG_LEVEL", "loud");
    ScopedEnv aux_env("RPMA_LOG_LEVEL_AUX", "disabled");
    testing::internal::CaptureStderr();
    rpma::log::load_env_thresholds();
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(main_threshold(), RPMA_LOG_LEVEL_ERROR);
    EXPECT_EQ(aux_threshold(), RPMA_LOG_DISABLED);
    EXPECT_NE(err.find("RPMA_LOG_LEVEL"), std::string::npos) << err;
    EXPECT_NE(err.find("loud"), std::string::npos) << err;
}

std::atomic<int> g_count_a{0};
std::atomic<int> g_count_b{0};
std::atomic<int> g_malformed{0};

void check_message(const char *fmt, va_list ap) {
    char buf[128];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    int t = -1, i = -1;
    char tail = 0;
    if (std::sscanf(buf, "thread %d message %d%c", &t, &i, &tail) != 2 || t < 0 || t > 3 || i < 0)
        g_malformed++;
}
void counter_a(rpma_log_level, const char *, const int, const char *, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    check_message(fmt, ap);
    va_end(ap);
    g_count_a++;
}
void counter_b(rpma_log_level, const char *, const int, const char *, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    check_message(fmt, ap);
    va_end(ap);
    g_count_b++;
}

TEST_F(Log, SwappingFunctionWhileLoggingIsSafe) {
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_WARNING), 0);
    ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_DISABLED), 0);
    g_count_a = 0;
    g_count_b = 0;
    g_malformed = 0;
    ASSERT_EQ(rpma_log_set_function(counter_a), 0);

    // Loggers run until the swapper is done, so every swap happens while messages are in flight.
    // Bounded by count and by time; slow builds (sanitizers) stop at the deadline.
    constexpr int kThreads = 4, kSwaps = 1000;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::atomic<bool> done{false};
    std::atomic<int> started{0};
    std::atomic<int> logged{0};
    std::vector<std::thread> loggers;
    for (int t = 0; t < kThreads; t++) {
        loggers.emplace_back([t, &started, &done, &logged, deadline] {
            started++;
            for (int i = 0; !done.load() && std::chrono::steady_clock::now() < deadline; i++) {
                RPMA_LOG_WARNING("thread %d message %d", t, i);
                logged++;
            }
        });
    }
    // Swap only once every logger is busy.
    while ((started.load() < kThreads || logged.load() < 100 * kThreads) &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
    int swaps = 0;
    for (; swaps < kSwaps && std::chrono::steady_clock::now() < deadline; swaps++) {
        // Mostly the two counters; now and then the default (syslog only, AUX is disabled).
        // After each swap, spin until the new function has been used, so swaps and messages
        // really interleave even when the scheduler runs the threads in bursts.
        bool to_default = swaps % 500 == 499;
        std::atomic<int> &progress = to_default ? logged : (swaps % 2) ? g_count_b : g_count_a;
        int seen = progress.load();
        rpma_log_function *fn = to_default    ? RPMA_LOG_USE_DEFAULT_FUNCTION
                                : (swaps % 2) ? counter_b
                                              : counter_a;
        ASSERT_EQ(rpma_log_set_function(fn), 0);
        while (progress.load() < seen + 2 && std::chrono::steady_clock::now() < deadline) {
        }
    }
    done = true;
    for (auto &th : loggers) th.join();

    EXPECT_GE(swaps, 100);  // fewer only if a sanitizer build hit the deadline
    EXPECT_EQ(g_malformed.load(), 0);
    EXPECT_GT(g_count_a.load(), 0);
    EXPECT_GT(g_count_b.load(), 0);
    // Messages emitted while the default was installed went to syslog and are not counted.
    EXPECT_LE(g_count_a.load() + g_count_b.load(), logged.load());

    // Once the swapping stops, the installed function gets every message.
    ASSERT_EQ(rpma_log_set_function(counter_b), 0);
    int before = g_count_b.load();
    for (int i = 0; i < 10; i++) RPMA_LOG_WARNING("thread 0 message %d", i);
    EXPECT_EQ(g_count_b.load(), before + 10);
}

}  // namespace
