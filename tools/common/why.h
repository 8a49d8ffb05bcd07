/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * why.h -- the cause of a failed librpma call in one plain line, for the tools and the examples.
 *
 * A failing call returns a code that says little ("The transport provider reported an error");
 * the library logs the cause ("cannot listen on 127.0.0.1:7204: Address already in use"), but by
 * default only to syslog. why_init() installs a log function for this process (the library's
 * defaults stay upstream's for every other program) that keeps what a call logs at WARNING and
 * above on its own thread, between why_begin() and why_end(), for the caller's error line;
 * anything logged elsewhere (a library thread, no call checked) goes to stderr at once as
 * "PROG: librpma: MESSAGE".
 *
 * When the user set RPMA_LOG_LEVEL_AUX, the library's own stderr lines are what was asked for:
 * the default log function stays, and why_end() falls back to rpma_err_2str().
 */
#ifndef RPMA_TOOLS_WHY_H
#define RPMA_TOOLS_WHY_H

#ifdef __cplusplus
extern "C" {
#endif

/* prog names this process in the lines printed at once; call before any other librpma call */
void why_init(const char *prog);

/* starts keeping what the library logs on this thread */
void why_begin(void);

/*
 * stops keeping; ret is what the call returned. On success returns NULL (a warning the call
 * logged is printed). On failure returns the cause, valid until this thread's next why_begin():
 * the first message the library logged during the call, or else rpma_err_2str(ret).
 */
const char *why_end(int ret);

/* whether the cause why_end() returned came from the library's log (it then says what failed) */
int why_logged(void);

/* the function name at the start of a call expression ("rpma_mr_reg" of "rpma_mr_reg(p, ...)"):
 * error lines name the function, never the expression; valid until this thread's next call */
const char *why_fn(const char *call);

#ifdef __cplusplus
}
#endif

#endif /* RPMA_TOOLS_WHY_H */
