/* SPDX-License-Identifier: BSD-3-Clause */
/* why.c -- the cause of a failed librpma call in one plain line (see why.h) */
#include "why.h"

#include <librpma.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_prog = "rpma";

static _Thread_local bool t_keeping;
static _Thread_local bool t_logged;
static _Thread_local char t_msg[512];

static void keep_or_print(enum rpma_log_level level, const char *file_name, const int line_no,
                          const char *function_name, const char *message_format, ...) {
    (void)file_name;
    (void)line_no;
    (void)function_name;
    /* NOTICE and below are chatter (they pass only when the user lowered the main threshold) */
    if (level > RPMA_LOG_LEVEL_WARNING) return;
    char msg[sizeof(t_msg)];
    va_list ap;
    va_start(ap, message_format);
    vsnprintf(msg, sizeof(msg), message_format, ap);
    va_end(ap);
    if (t_keeping) {
        /* the first message is the root cause; later ones report its consequences */
        if (!t_logged) snprintf(t_msg, sizeof(t_msg), "%s", msg);
        t_logged = true;
        return;
    }
    /* one call, one line: lines from several threads do not interleave */
    fprintf(stderr, "%s: librpma: %s\n", g_prog, msg);
}

void why_init(const char *prog) {
    g_prog = prog;
    const char *aux = getenv("RPMA_LOG_LEVEL_AUX");
    if (aux && *aux) return;
    rpma_log_set_function(keep_or_print);
}

void why_begin(void) {
    t_keeping = true;
    t_logged = false;
    t_msg[0] = '\0';
}

const char *why_end(int ret) {
    t_keeping = false;
    if (ret == 0) {
        if (t_logged) fprintf(stderr, "%s: librpma: %s\n", g_prog, t_msg);
        t_logged = false;
        return NULL;
    }
    return t_logged ? t_msg : rpma_err_2str(ret);
}

int why_logged(void) {
    return t_logged;
}

const char *why_fn(const char *call) {
    static _Thread_local char name[64];
    size_t n = strcspn(call, "( ");
    snprintf(name, sizeof(name), "%.*s", (int)(n < sizeof(name) ? n : sizeof(name) - 1), call);
    return name;
}
