/* idle_ticker.c -- LD_PRELOAD=libidle_ticker.so RPMA_IDLE_TICK_US=1000 CMD: a thread in CMD (and
 * in each child it forks) that does nothing but sleep RPMA_IDLE_TICK_US at a time. It adds no
 * work to any path; it only keeps the CPUs from idling as long. On this project's 2-core VM the
 * blocking round trips move by 10-18 % with it (docs/performance.md, "What the numbers mean"):
 * how long an idle vCPU takes to wake is part of every blocking figure there. Without
 * RPMA_IDLE_TICK_US it starts nothing. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static long tick_us;

static void *tick(void *arg) {
    (void)arg;
    struct timespec ts = {tick_us / 1000000, (tick_us % 1000000) * 1000};
    for (;;) nanosleep(&ts, NULL);
    return NULL;
}

static void start(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, tick, NULL) == 0) pthread_detach(t);
}

__attribute__((constructor)) static void init(void) {
    const char *v = getenv("RPMA_IDLE_TICK_US");
    tick_us = v ? strtol(v, NULL, 10) : 0;
    if (tick_us <= 0) return;
    start();
    pthread_atfork(NULL, NULL, start); /* a forked child has only the forking thread */
}
