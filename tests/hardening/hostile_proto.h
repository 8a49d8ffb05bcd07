/* SPDX-License-Identifier: BSD-3-Clause */
/* hostile_proto.h -- what hostile_server and its clients agree on */
#ifndef RPMA_HARD_HOSTILE_PROTO_H
#define RPMA_HARD_HOSTILE_PROTO_H

#include <stdio.h>
#include <string.h>

#define HS_GUARD (4 * 1024)   /* guard bytes on each side of the all-usage region */
#define HS_REGION (64 * 1024) /* the all-usage region */
#define HS_ALLOC (HS_GUARD + HS_REGION + HS_GUARD)
#define HS_LEGIT (4 * 1024)   /* region [0, 4K): legitimate librpma clients */
#define HS_SCRATCH (4 * 1024) /* region [4K, 8K): valid writes of raw clients */
#define HS_RO (4 * 1024)      /* the READ_SRC-only region */
#define HS_MSG_LEN 64         /* CHECK / QUIT messages and their answers */

#define HS_OFF_MR 0
#define HS_OFF_RO 21
#define HS_OFF_PCFG 42
#define HS_PDATA_LEN 43

/* the server's answer to CHECK */
struct hs_stats {
    int ok;
    unsigned long reqs, established, lost, closed;
    int live, fds;
    long bad;
};

static inline int hs_stats_parse(const char *s, struct hs_stats *st) {
    char word[8] = {0};
    memset(st, 0, sizeof(*st));
    int n = sscanf(s, "%7s %lu %lu %lu %lu %d %d %ld", word, &st->reqs, &st->established, &st->lost,
                   &st->closed, &st->live, &st->fds, &st->bad);
    st->ok = strcmp(word, "OK") == 0;
    return n == 8 ? 0 : -1;
}

#endif /* RPMA_HARD_HOSTILE_PROTO_H */
