// Internal logging: every library message goes through RPMA_LOG_* so the thresholds and the
// user's function (rpma_log_set_function) apply to all of them.
#pragma once

#include <librpma.h>

namespace rpma::log {

// True when a message of this level passes the main threshold; cheap (one atomic load).
bool enabled(rpma_log_level level) noexcept;

// Formats and hands the message to the current log function.
void emit(rpma_log_level level, const char *file, int line, const char *func, const char *fmt,
          ...) noexcept __attribute__((format(printf, 5, 6)));

// Threshold access behind rpma_log_{set,get}_threshold; INVAL for values outside the enums.
int set_threshold(int threshold, int level) noexcept;
int get_threshold(int threshold, rpma_log_level *level) noexcept;

// Installs the function every message goes to; nullptr restores default_function.
void set_function(rpma_log_function *function) noexcept;

// Parses an RPMA_LOG_LEVEL* value: a number -1..5 or a level name ("debug", "warning",
// "disabled", ...; case-insensitive, an optional "RPMA_LOG_LEVEL_" prefix is accepted).
// Returns false and leaves *out alone when the text is not a level.
bool parse_level(const char *text, rpma_log_level *out) noexcept;

// Applies RPMA_LOG_LEVEL and RPMA_LOG_LEVEL_AUX from the environment to the two thresholds.
// Runs once when the library is loaded; exposed so tests can re-run it.
void load_env_thresholds() noexcept;

// The library's own log function (syslog, plus stderr at or below the AUX threshold).
void default_function(rpma_log_level level, const char *file_name, const int line_no,
                      const char *function_name, const char *message_format, ...) noexcept
    __attribute__((format(printf, 5, 6)));

}  // namespace rpma::log

#define RPMA_LOG(level, ...)                                                     \
    do {                                                                         \
        if (::rpma::log::enabled(level))                                         \
            ::rpma::log::emit(level, __FILE__, __LINE__, __func__, __VA_ARGS__); \
    } while (0)

#define RPMA_LOG_FATAL(...) RPMA_LOG(RPMA_LOG_LEVEL_FATAL, __VA_ARGS__)
#define RPMA_LOG_ERROR(...) RPMA_LOG(RPMA_LOG_LEVEL_ERROR, __VA_ARGS__)
#define RPMA_LOG_WARNING(...) RPMA_LOG(RPMA_LOG_LEVEL_WARNING, __VA_ARGS__)
#define RPMA_LOG_NOTICE(...) RPMA_LOG(RPMA_LOG_LEVEL_NOTICE, __VA_ARGS__)
#define RPMA_LOG_INFO(...) RPMA_LOG(RPMA_LOG_LEVEL_INFO, __VA_ARGS__)
#define RPMA_LOG_DEBUG(...) RPMA_LOG(RPMA_LOG_LEVEL_DEBUG, __VA_ARGS__)
