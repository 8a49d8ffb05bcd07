/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 14-log/client.c -- logging through a function of one's own (rpma_log_set_function) and the
 * two thresholds:
 *   RPMA_LOG_THRESHOLD     - messages above it reach no function at all (default WARNING)
 *   RPMA_LOG_THRESHOLD_AUX - the default function also prints to stderr the messages at or
 *                            below it (default DISABLED); it writes to syslog in any case
 *
 * Two mistakes make the library log: deleting a peer that still has a registered memory region
 * (an ERROR), and connecting to PORT + 1, where nobody listens (a NOTICE). The client makes them
 * under different thresholds, counts what reaches its function, and finally connects to the
 * server properly.
 *
 * usage: client ADDR PORT
 */
#include <stdarg.h>
#include <string.h>

#include "common.h"

static const char *level_name(enum rpma_log_level level) {
    static const char *const names[] = {"FATAL", "ERROR", "WARNING", "NOTICE", "INFO", "DEBUG"};
    if (level == RPMA_LOG_DISABLED) return "DISABLED";
    return level >= RPMA_LOG_LEVEL_FATAL && level <= RPMA_LOG_LEVEL_DEBUG ? names[level] : "?";
}

/* per level, what reached log_to_stdout; updated atomically: the library may log from any thread */
static int counts[RPMA_LOG_LEVEL_DEBUG + 1];

static void log_to_stdout(enum rpma_log_level level, const char *file_name, const int line_no,
                          const char *function_name, const char *message_format, ...) {
    (void)file_name;
    (void)line_no;
    char msg[512];
    va_list ap;
    va_start(ap, message_format);
    vsnprintf(msg, sizeof(msg), message_format, ap);
    va_end(ap);
    if (level >= RPMA_LOG_LEVEL_FATAL && level <= RPMA_LOG_LEVEL_DEBUG)
        __atomic_add_fetch(&counts[level], 1, __ATOMIC_RELAXED);
    printf("    [library %s] %s(): %s\n", level_name(level), function_name ? function_name : "",
           msg);
}

static void reset_counts(void) {
    for (int l = 0; l <= RPMA_LOG_LEVEL_DEBUG; l++)
        __atomic_store_n(&counts[l], 0, __ATOMIC_RELAXED);
}

static int count(enum rpma_log_level level) {
    return __atomic_load_n(&counts[level], __ATOMIC_RELAXED);
}

/* the levels above the threshold must not have reached the function */
static void check_threshold(enum rpma_log_level threshold) {
    for (int l = threshold + 1; l <= RPMA_LOG_LEVEL_DEBUG; l++)
        if (count(l) != 0)
            EX_FAIL("%d %s messages passed the threshold %s", count(l), level_name(l),
                    level_name(threshold));
}

/* mistake 1: a peer cannot be deleted while a region is registered with it. The peer is a scratch
 * one: the man page keeps *peer_ptr after the failure, but upstream librpma frees the peer anyway,
 * so a portable program never uses it again (the second delete then gives 0 either way) */
static void delete_busy_peer(const char *addr) {
    static char buf[64];
    struct rpma_peer *peer = ex_peer_new(addr, false);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, buf, sizeof(buf), RPMA_MR_USAGE_READ_SRC, &mr));
    int ret = rpma_peer_delete(&peer);
    if (ret == 0) EX_FAIL("rpma_peer_delete succeeded with a region registered");
    printf("  rpma_peer_delete with a region registered: %s\n", rpma_err_2str(ret));
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_peer_delete(&peer));
}

/* mistake 2: connecting where nobody listens */
static void connect_to_nobody(struct rpma_peer *peer, const char *addr, const char *port) {
    struct rpma_conn_req *req = NULL;
    EX_CHECK(rpma_conn_req_new(peer, addr, port, NULL, &req));
    struct rpma_conn *conn = NULL;
    EX_CHECK(rpma_conn_req_connect(&req, NULL, &conn));
    enum rpma_conn_event ev = ex_next_event(conn);
    printf("  connecting to %s:%s: %s\n", addr, port, rpma_utils_conn_event_2str(ev));
    if (ev != RPMA_CONN_REJECTED && ev != RPMA_CONN_UNREACHABLE)
        EX_FAIL("expected REJECTED or UNREACHABLE");
    EX_CHECK(rpma_conn_delete(&conn));
}

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    char nobody_port[16];
    snprintf(nobody_port, sizeof(nobody_port), "%d", atoi(port) + 1);

    enum rpma_log_level main_level, aux_level;
    EX_CHECK(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &main_level));
    EX_CHECK(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &aux_level));
    printf("default thresholds: main %s, aux %s\n", level_name(main_level), level_name(aux_level));

    EX_CHECK(rpma_log_set_function(log_to_stdout));
    struct rpma_peer *peer = ex_peer_new(addr, false);

    printf("threshold %s:\n", level_name(main_level));
    reset_counts();
    delete_busy_peer(addr);
    connect_to_nobody(peer, addr, nobody_port);
    check_threshold(main_level);
    printf("  reached the function: %d ERROR, %d NOTICE\n", count(RPMA_LOG_LEVEL_ERROR),
           count(RPMA_LOG_LEVEL_NOTICE));
    if (count(RPMA_LOG_LEVEL_ERROR) == 0) EX_FAIL("the ERROR did not reach the function");

    printf("threshold NOTICE:\n");
    EX_CHECK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_NOTICE));
    reset_counts();
    connect_to_nobody(peer, addr, nobody_port);
    check_threshold(RPMA_LOG_LEVEL_NOTICE);
    printf("  reached the function: %d NOTICE\n", count(RPMA_LOG_LEVEL_NOTICE));
    if (count(RPMA_LOG_LEVEL_NOTICE) == 0) EX_FAIL("the NOTICE did not reach the function");

    printf("threshold DISABLED:\n");
    EX_CHECK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_DISABLED));
    reset_counts();
    delete_busy_peer(addr);
    connect_to_nobody(peer, addr, nobody_port);
    for (int l = RPMA_LOG_LEVEL_FATAL; l <= RPMA_LOG_LEVEL_DEBUG; l++)
        if (count(l) != 0) EX_FAIL("a message reached the function while logging is disabled");
    printf("  nothing reached the function\n");

    /* back to the defaults; the aux threshold makes the default function echo ERRORs to stderr */
    EX_CHECK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, main_level));
    EX_CHECK(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION));
    EX_CHECK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_ERROR));
    printf("default function, aux threshold ERROR (the message goes to syslog and stderr):\n");
    fflush(stdout);
    reset_counts();
    delete_busy_peer(addr);
    if (count(RPMA_LOG_LEVEL_ERROR) != 0) EX_FAIL("the custom function is still in use");
    EX_CHECK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, aux_level));

    struct rpma_conn *conn = ex_connect(peer, addr, port, NULL, NULL, 0);
    printf("connected to the server at %s:%s\n", addr, port);
    ex_disconnect(&conn);
    EX_CHECK(rpma_peer_delete(&peer));
    return 0;
}
