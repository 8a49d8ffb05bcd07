/* SPDX-License-Identifier: BSD-3-Clause */
/* mt.c -- helpers of the multi-threaded tests */
#define _GNU_SOURCE
#include "mt.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

void mt_set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) IT_FAIL("fcntl: %s", strerror(errno));
}

long mt_arg(const struct it_args *a, int k, long def) {
    if (k >= a->argc) return def;
    char *end = NULL;
    long v = strtol(a->argv[k], &end, 10);
    if (!end || *end || v <= 0) IT_FAIL("bad argument %d: %s", k, a->argv[k]);
    return v;
}
