/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * provider_unknown.c -- RPMA_PROVIDER naming a provider this build lacks:
 * rpma_utils_get_ibv_context fails with RPMA_E_PROVIDER, and an error message names the variable,
 * so a user learns why at once. ctest runs it with RPMA_PROVIDER=bogus.
 */
#include <librpma.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int g_named; /* an error-level message mentioned RPMA_PROVIDER */

static void log_fn(enum rpma_log_level level, const char *file_name, const int line_no,
                   const char *function_name, const char *message_format, ...) {
    (void)file_name;
    (void)line_no;
    (void)function_name;
    char msg[1024];
    va_list ap;
    va_start(ap, message_format);
    vsnprintf(msg, sizeof(msg), message_format, ap);
    va_end(ap);
    fprintf(stderr, "log(%d): %s\n", (int)level, msg);
    if (level <= RPMA_LOG_LEVEL_ERROR && strstr(msg, "RPMA_PROVIDER")) g_named = 1;
}

int main(int argc, char *argv[]) {
    const char *addr = argc > 1 ? argv[1] : "127.0.0.1";
    if (rpma_log_set_function(log_fn) != 0) {
        fprintf(stderr, "FAIL: rpma_log_set_function\n");
        return 1;
    }
    struct ibv_context *ctx = NULL;
    int ret = rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx);
    if (ret != RPMA_E_PROVIDER) {
        fprintf(stderr,
                "FAIL: rpma_utils_get_ibv_context(%s) = %d (%s), expected "
                "RPMA_E_PROVIDER\n",
                addr, ret, rpma_err_2str(ret));
        return 1;
    }
    if (!g_named) {
        fprintf(stderr, "FAIL: no error message names RPMA_PROVIDER\n");
        return 1;
    }
    printf("OK: RPMA_E_PROVIDER, and the log names RPMA_PROVIDER\n");
    return 0;
}
