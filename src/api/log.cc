// rpma_log_*: the thresholds and the log function live in core/log.cc.
#include "api/shim.h"

// Atomic stores cannot be interrupted, so RPMA_E_AGAIN (a lost race in upstream's
// compare-and-swap) never happens here: the last writer wins.
RPMA_EXPORT int rpma_log_set_threshold(enum rpma_log_threshold threshold,
                                       enum rpma_log_level level) {
    return rpma::log::set_threshold(threshold, level);
}

RPMA_EXPORT int rpma_log_get_threshold(enum rpma_log_threshold threshold,
                                       enum rpma_log_level *level) {
    return rpma::log::get_threshold(threshold, level);
}

RPMA_EXPORT int rpma_log_set_function(rpma_log_function *log_function) {
    rpma::log::set_function(log_function);
    return 0;
}
