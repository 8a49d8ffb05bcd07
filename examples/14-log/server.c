/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 14-log/server.c -- routes the library's log to a function of its own (rpma_log_set_function)
 * with the threshold raised to DEBUG, so that every message the library produces while serving
 * one client is printed with its level and origin
 *
 * usage: server ADDR PORT
 */
#include <stdarg.h>
#include <string.h>

#include "common.h"

static const char *level_name(enum rpma_log_level level) {
    static const char *const names[] = {"FATAL", "ERROR", "WARNING", "NOTICE", "INFO", "DEBUG"};
    return level >= RPMA_LOG_LEVEL_FATAL && level <= RPMA_LOG_LEVEL_DEBUG ? names[level] : "?";
}

static int messages; /* updated atomically: the library may log from its own threads */

/* may be called from any thread: format first, then print with one call */
static void log_to_stdout(enum rpma_log_level level, const char *file_name, const int line_no,
                          const char *function_name, const char *message_format, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, message_format);
    vsnprintf(msg, sizeof(msg), message_format, ap);
    va_end(ap);
    __atomic_add_fetch(&messages, 1, __ATOMIC_RELAXED);
    if (file_name)
        printf("[library %s] %s:%d %s(): %s\n", level_name(level), file_name, line_no,
               function_name, msg);
    else
        printf("[library %s] %s\n", level_name(level), msg);
}

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];

    EX_CHECK(rpma_log_set_function(log_to_stdout));
    EX_CHECK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG));

    struct rpma_peer *peer = ex_peer_new(addr, true);
    struct rpma_ep *ep = ex_listen(peer, addr, port);
    struct rpma_conn_req *req = ex_next_conn_req(ep, NULL);
    struct rpma_conn *conn = ex_accept(&req, NULL, 0);
    printf("client connected\n");
    ex_wait_closed(&conn);
    printf("client disconnected\n");
    EX_CHECK(rpma_ep_shutdown(&ep));
    EX_CHECK(rpma_peer_delete(&peer));

    printf("the library logged %d messages at DEBUG or below\n",
           __atomic_load_n(&messages, __ATOMIC_RELAXED));
    EX_CHECK(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION));
    return 0;
}
