/* SPDX-License-Identifier: BSD-3-Clause */
/* util.c -- op names, the data pattern, the latency histogram and clocks */
#define _GNU_SOURCE
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "perf.h"

static const char *const op_names[OP__COUNT] = {
    [OP_READ] = "read",
    [OP_WRITE] = "write",
    [OP_WRITE_FLUSH] = "write-flush",
    [OP_WRITE_FLUSH_PERSISTENT] = "write-flush-persistent",
    [OP_ATOMIC_WRITE] = "atomic-write",
    [OP_SEND] = "send",
    [OP_WRITE_IMM] = "write-imm",
};

const char *perf_op_name(enum perf_op op) {
    return (unsigned)op < OP__COUNT ? op_names[op] : "?";
}

int perf_op_parse(const char *s, enum perf_op *op) {
    for (int i = 0; i < OP__COUNT; i++)
        if (strcmp(s, op_names[i]) == 0) {
            *op = (enum perf_op)i;
            return 0;
        }
    return -1;
}

uint64_t perf_pattern_word(uint64_t offset) {
    /* splitmix64 of the word index: every word differs, so misplaced data shows */
    uint64_t x = (offset >> 3) + 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void perf_pattern_fill(void *buf, size_t len, uint64_t offset) {
    uint8_t *p = buf;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t w = perf_pattern_word(offset + i);
        memcpy(p + i, &w, len - i < 8 ? len - i : 8);
    }
}

long perf_pattern_check(const void *buf, size_t len, uint64_t offset) {
    const uint8_t *p = buf;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t w = perf_pattern_word(offset + i);
        size_t n = len - i < 8 ? len - i : 8;
        if (memcmp(p + i, &w, n) != 0) {
            for (size_t k = 0; k < n; k++)
                if (p[i + k] != ((const uint8_t *)&w)[k]) return (long)(i + k);
        }
    }
    return -1;
}

void hist_init(struct hist *h) {
    memset(h, 0, sizeof(*h));
    h->min_ns = UINT64_MAX;
}

static unsigned bucket_of(uint64_t v) {
    if (v < 2 * HIST_SUB) return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - 6; /* v >> shift lands in [64, 128) */
    unsigned idx = HIST_SUB * shift + (unsigned)(v >> shift);
    return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/* midpoint of a bucket */
static uint64_t bucket_value(unsigned idx) {
    if (idx < 2 * HIST_SUB) return idx;
    unsigned shift = idx / HIST_SUB - 1;
    uint64_t m = idx - (uint64_t)HIST_SUB * shift;
    return (m << shift) + ((1ULL << shift) >> 1);
}

void hist_add(struct hist *h, uint64_t ns) {
    h->count++;
    h->sum_ns += ns;
    if (ns > h->max_ns) h->max_ns = ns;
    if (ns < h->min_ns) h->min_ns = ns;
    h->b[bucket_of(ns)]++;
}

void hist_merge(struct hist *dst, const struct hist *src) {
    dst->count += src->count;
    dst->sum_ns += src->sum_ns;
    if (src->max_ns > dst->max_ns) dst->max_ns = src->max_ns;
    if (src->min_ns < dst->min_ns) dst->min_ns = src->min_ns;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) dst->b[i] += src->b[i];
}

uint64_t hist_pct(const struct hist *h, double p) {
    if (h->count == 0) return 0;
    if (p >= 100.0) return h->max_ns;
    uint64_t rank = (uint64_t)(p / 100.0 * (double)h->count + 0.999999);
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            uint64_t v = bucket_value(i);
            /* a bucket's midpoint may overshoot the true extremes */
            if (v > h->max_ns) v = h->max_ns;
            if (v < h->min_ns) v = h->min_ns;
            return v;
        }
    }
    return h->max_ns;
}

uint64_t perf_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void perf_cpu_ns(uint64_t *user, uint64_t *sys) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user = (uint64_t)ru.ru_utime.tv_sec * 1000000000ULL + (uint64_t)ru.ru_utime.tv_usec * 1000ULL;
    *sys = (uint64_t)ru.ru_stime.tv_sec * 1000000000ULL + (uint64_t)ru.ru_stime.tv_usec * 1000ULL;
}
