// Constant strings for error codes and connection events; both calls accept any value.
#include "api/shim.h"

RPMA_EXPORT const char *rpma_err_2str(int ret) {
    switch (ret) {
        case 0:
            return "Success";
        case RPMA_E_UNKNOWN:
            return "Unknown error";
        case RPMA_E_NOSUPP:
            return "Operation not supported";
        case RPMA_E_PROVIDER:
            return "The transport provider reported an error";
        case RPMA_E_NOMEM:
            return "Out of memory";
        case RPMA_E_INVAL:
            return "Invalid argument";
        case RPMA_E_NO_COMPLETION:
            return "No completion is ready";
        case RPMA_E_NO_EVENT:
            return "No event is ready";
        case RPMA_E_AGAIN:
            return "Temporary failure, try again";
        case RPMA_E_SHARED_CHANNEL:
            return "The completion channel is shared by the CQ and the RCQ";
        case RPMA_E_NOT_SHARED_CHNL:
            return "The connection does not use a shared completion channel";
        default:
            return "Unrecognised error code";
    }
}

RPMA_EXPORT const char *rpma_utils_conn_event_2str(enum rpma_conn_event conn_event) {
    switch (conn_event) {
        case RPMA_CONN_UNDEFINED:
            return "Undefined connection event";
        case RPMA_CONN_ESTABLISHED:
            return "Connection established";
        case RPMA_CONN_CLOSED:
            return "Connection closed";
        case RPMA_CONN_LOST:
            return "Connection lost";
        case RPMA_CONN_REJECTED:
            return "Connection rejected";
        case RPMA_CONN_UNREACHABLE:
            return "Peer unreachable";
    }
    return "Unknown connection event";
}
