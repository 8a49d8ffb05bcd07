/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_common.h -- clocks, CPU time, a latency recorder and size parsing for the peers */
#ifndef RPMA_BENCH_COMMON_H
#define RPMA_BENCH_COMMON_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* this process's CPU time, user + system */
static inline uint64_t bench_cpu_ns(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ULL +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ULL;
}

static inline size_t bench_parse_size(const char *s) {
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K') v <<= 10;
    if (*end == 'm' || *end == 'M') v <<= 20;
    return (size_t)v;
}

/* latency samples in 100 ns steps up to 100 ms; exact enough for p50/p99 */
#define BENCH_LAT_STEP 100
#define BENCH_LAT_SLOTS 1000000
struct bench_lat {
    uint64_t count, sum, max;
    uint32_t *slots;
};

static inline void bench_lat_init(struct bench_lat *l) {
    memset(l, 0, sizeof(*l));
    l->slots = calloc(BENCH_LAT_SLOTS, sizeof(uint32_t));
    if (!l->slots) abort();
}

static inline void bench_lat_free(struct bench_lat *l) {
    free(l->slots);
    l->slots = NULL;
}

static inline void bench_lat_add(struct bench_lat *l, uint64_t ns) {
    uint64_t i = ns / BENCH_LAT_STEP;
    l->slots[i < BENCH_LAT_SLOTS ? i : BENCH_LAT_SLOTS - 1]++;
    l->count++;
    l->sum += ns;
    if (ns > l->max) l->max = ns;
}

static inline double bench_lat_pct_us(const struct bench_lat *l, double p) {
    if (!l->count) return 0;
    uint64_t rank = (uint64_t)(p / 100.0 * (double)l->count + 0.999999), seen = 0;
    if (rank == 0) rank = 1;
    for (uint64_t i = 0; i < BENCH_LAT_SLOTS; i++) {
        seen += l->slots[i];
        if (seen >= rank) return ((double)i + 0.5) * BENCH_LAT_STEP / 1e3;
    }
    return (double)l->max / 1e3;
}

/* "lat_us":{...} */
static inline void bench_lat_json(FILE *f, const struct bench_lat *l) {
    fprintf(f, "\"lat_us\":{\"mean\":%.3f,\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f}",
            l->count ? (double)l->sum / (double)l->count / 1e3 : 0.0, bench_lat_pct_us(l, 50),
            bench_lat_pct_us(l, 99), bench_lat_pct_us(l, 99.9), (double)l->max / 1e3);
}

/* sleeps s seconds, through signals */
static inline void bench_sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

/*
 * Forks the server of a two-process benchmark, joined to this process by two pipes: up (server
 * to client) and down. Returns the server's pid here, with up[0] and down[1] left open; in the
 * server it returns 0, with up[1] and down[0] left open. The server dies with this process.
 * -1 if a pipe or the fork fails.
 */
static inline pid_t bench_fork_server(int up[2], int down[2]) {
    if (pipe(up) || pipe(down)) return -1;
    fflush(stdout);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        close(up[0]);
        close(down[1]);
        return 0;
    }
    close(up[1]);
    close(down[0]);
    return pid;
}

#endif /* RPMA_BENCH_COMMON_H */
