#include "common/log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rpma::log {
namespace {

// Constant-initialised, so logging works even from other objects' static constructors.
std::atomic<int> g_threshold[RPMA_LOG_THRESHOLD_MAX] = {RPMA_LOG_LEVEL_WARNING, RPMA_LOG_DISABLED};
std::atomic<rpma_log_function *> g_function{nullptr};  // nullptr = default_function

constexpr const char *kLevelNames[] = {"FATAL", "ERROR", "WARNING", "NOTICE", "INFO", "DEBUG"};
constexpr int kSyslogPriority[] = {LOG_CRIT, LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG};

bool valid_level(int level) noexcept {
    return level >= RPMA_LOG_DISABLED && level <= RPMA_LOG_LEVEL_DEBUG;
}
bool valid_threshold(int threshold) noexcept {
    return threshold == RPMA_LOG_THRESHOLD || threshold == RPMA_LOG_THRESHOLD_AUX;
}

const char *base_name(const char *path) noexcept {
    const char *slash = std::strrchr(path, '/');
    return slash ? slash + 1 : path;
}

// Formats into buf, or into a heap buffer (*heap, caller frees) when buf is too small.
const char *format_message(char *buf, size_t size, char **heap, const char *fmt,
                           va_list ap) noexcept {
    va_list copy;
    va_copy(copy, ap);
    int n = std::vsnprintf(buf, size, fmt, ap);
    if (n >= 0 && static_cast<size_t>(n) >= size) {
        *heap = static_cast<char *>(std::malloc(static_cast<size_t>(n) + 1));
        if (*heap) {
            std::vsnprintf(*heap, static_cast<size_t>(n) + 1, fmt, copy);
            va_end(copy);
            return *heap;
        }
    }
    va_end(copy);
    if (n < 0) std::snprintf(buf, size, "(unformattable message: %s)", fmt);
    return buf;  // truncated if the heap buffer could not be had
}

void write_stderr(rpma_log_level level, const char *file, int line, const char *func,
                  const char *msg) noexcept {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    tm local{};
    localtime_r(&ts.tv_sec, &local);
    char when[32];
    size_t w = strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &local);
    when[w] = '\0';
    long tid = syscall(SYS_gettid);

    char prefix[512];
    int n;
    if (file)
        n = std::snprintf(prefix, sizeof(prefix), "%s.%06ld [%ld] %s %s:%d %s(): ", when,
                          ts.tv_nsec / 1000, tid, kLevelNames[level], base_name(file), line,
                          func ? func : "?");
    else
        n = std::snprintf(prefix, sizeof(prefix), "%s.%06ld [%ld] %s ", when, ts.tv_nsec / 1000,
                          tid, kLevelNames[level]);
    if (n < 0) return;
    size_t plen = std::min(static_cast<size_t>(n), sizeof(prefix) - 1);

    // One writev per message so lines from concurrent threads do not interleave.
    iovec iov[3] = {{prefix, plen}, {const_cast<char *>(msg), std::strlen(msg)}, {nullptr, 1}};
    char newline = '\n';
    iov[2].iov_base = &newline;
    ssize_t r;
    do {
        r = ::writev(STDERR_FILENO, iov, 3);
    } while (r < 0 && errno == EINTR);
}

// Thresholds come from the environment before main() so no API call can race with it.
struct EnvLoader {
    EnvLoader() noexcept { load_env_thresholds(); }
} g_env_loader;

}  // namespace

bool enabled(rpma_log_level level) noexcept {
    return level >= RPMA_LOG_LEVEL_FATAL &&
           static_cast<int>(level) <=
               g_threshold[RPMA_LOG_THRESHOLD].load(std::memory_order_relaxed);
}

void emit(rpma_log_level level, const char *file, int line, const char *func, const char *fmt,
          ...) noexcept {
    if (!valid_level(level) || level == RPMA_LOG_DISABLED) return;
    char buf[1024];
    char *heap = nullptr;
    va_list ap;
    va_start(ap, fmt);
    const char *msg = format_message(buf, sizeof(buf), &heap, fmt, ap);
    va_end(ap);

    // Loaded once: a concurrent swap makes this message go to either function, both valid.
    rpma_log_function *fn = g_function.load(std::memory_order_acquire);
    if (fn)
        fn(level, file, line, func, "%s", msg);
    else
        default_function(level, file, line, func, "%s", msg);
    std::free(heap);
}

int set_threshold(int threshold, int level) noexcept {
    if (!valid_threshold(threshold) || !valid_level(level)) return RPMA_E_INVAL;
    g_threshold[threshold].store(level, std::memory_order_relaxed);
    return 0;
}

int get_threshold(int threshold, rpma_log_level *level) noexcept {
    if (!valid_threshold(threshold) || level == nullptr) return RPMA_E_INVAL;
    *level = static_cast<rpma_log_level>(g_threshold[threshold].load(std::memory_order_relaxed));
    return 0;
}

void set_function(rpma_log_function *function) noexcept {
    g_function.store(function, std::memory_order_release);
}

bool parse_level(const char *text, rpma_log_level *out) noexcept {
    if (text == nullptr) return false;
    while (*text == ' ' || *text == '\t') text++;
    if (*text == '\0') return false;

    char *end = nullptr;
    errno = 0;
    long number = std::strtol(text, &end, 10);
    if (end != text) {
        while (*end == ' ' || *end == '\t' || *end == '\n') end++;
        if (*end != '\0' || errno != 0 || !valid_level(static_cast<int>(number)) ||
            number != static_cast<int>(number))
            return false;
        *out = static_cast<rpma_log_level>(number);
        return true;
    }

    // Names: the enum's own spelling with or without its prefix, in any case.
    size_t len = std::strlen(text);
    while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t' || text[len - 1] == '\n'))
        len--;
    static constexpr const char *kPrefixes[] = {"RPMA_LOG_LEVEL_", "RPMA_LOG_"};
    for (const char *prefix : kPrefixes) {
        size_t plen = std::strlen(prefix);
        if (len > plen && strncasecmp(text, prefix, plen) == 0) {
            text += plen;
            len -= plen;
            break;
        }
    }
    if (len == 8 && strncasecmp(text, "DISABLED", 8) == 0) {
        *out = RPMA_LOG_DISABLED;
        return true;
    }
    for (int lvl = RPMA_LOG_LEVEL_FATAL; lvl <= RPMA_LOG_LEVEL_DEBUG; lvl++) {
        const char *name = kLevelNames[lvl];
        if (std::strlen(name) == len && strncasecmp(text, name, len) == 0) {
            *out = static_cast<rpma_log_level>(lvl);
            return true;
        }
    }
    return false;
}

void load_env_thresholds() noexcept {
    static constexpr struct {
        const char *var;
        rpma_log_threshold threshold;
    } kVars[] = {{"RPMA_LOG_LEVEL", RPMA_LOG_THRESHOLD},
                 {"RPMA_LOG_LEVEL_AUX", RPMA_LOG_THRESHOLD_AUX}};
    for (const auto &v : kVars) {
        const char *value = std::getenv(v.var);
        if (value == nullptr) continue;
        rpma_log_level level;
        if (parse_level(value, &level)) {
            set_threshold(v.threshold, level);
        } else {
            // Said once on stderr: a typo here would otherwise silently hide messages.
            std::fprintf(stderr, "rpma: ignoring %s=\"%s\" (expected -1..5 or a level name)\n",
                         v.var, value);
        }
    }
}

void default_function(rpma_log_level level, const char *file_name, const int line_no,
                      const char *function_name, const char *message_format, ...) noexcept {
    if (level < RPMA_LOG_LEVEL_FATAL || level > RPMA_LOG_LEVEL_DEBUG) return;
    char buf[1024];
    char *heap = nullptr;
    va_list ap;
    va_start(ap, message_format);
    const char *msg = format_message(buf, sizeof(buf), &heap, message_format, ap);
    va_end(ap);

    if (file_name)
        syslog(kSyslogPriority[level], "%s %s:%d %s(): %s", kLevelNames[level],
               base_name(file_name), line_no, function_name ? function_name : "?", msg);
    else
        syslog(kSyslogPriority[level], "%s %s", kLevelNames[level], msg);

    if (static_cast<int>(level) <=
        g_threshold[RPMA_LOG_THRESHOLD_AUX].load(std::memory_order_relaxed))
        write_stderr(level, file_name, line_no, function_name, msg);
    std::free(heap);
}

}  // namespace rpma::log
