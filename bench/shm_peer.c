/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm_peer.c -- the same-host limits for a shared-memory provider (issue 11), between two
 * processes (fork) on this host:
 *
 *   shm_peer pingpong --mode spin|eventfd [--size 8] [--seconds S]
 *       an N-byte ping-pong through a MAP_SHARED mapping: the client writes the payload and
 *       publishes a sequence word, the server echoes it back the same way. spin: both sides spin
 *       on the sequence word (yielding the CPU after SPIN_YIELD fruitless polls, which only
 *       happens when the two share a CPU); eventfd: both sides sleep in read() on an eventfd
 *       that the other side writes after publishing.
 *   shm_peer stream --mode memcpy|pvm_writev --size N [--seconds S] [--window BYTES]
 *       streaming bandwidth into the parent's memory, cycling over a --window (default 64 MiB)
 *       so it is not a cache figure. memcpy: the child copies N-byte blocks into a MAP_SHARED
 *       mapping of the parent; pvm_writev: the child writes N-byte blocks into the parent's
 *       private buffer with process_vm_writev (the child's default ptrace permission over its
 *       parent; nothing is widened). EPERM/ENOSYS there prints "available":false and exits 0.
 *
 * --time is accepted as a synonym of --seconds (as tcp_peer and fabric_peer name it). Prints one
 * JSON object with the keys bench/run.py reads from the other peers: ops, size, bw_bytes_per_s,
 * client_cpu_s, server_cpu_s, and lat_us.{mean,p50,p99} for pingpong. pingpong: client = the
 * parent in its timed loop, server = the forked echo's whole CPU. stream: client = the forked
 * writer in its timed loop (the kernel's copy included), server = the parent, which only waits;
 * cpu_s_per_GiB is their sum over the bytes moved.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"

#define STOP UINT64_MAX
#define MAX_PING (1u << 20)
#define SPIN_YIELD 256 /* far more polls than one round trip takes with a CPU each */

enum mode { M_SPIN, M_EVENTFD, M_MEMCPY, M_PVM };

struct opts {
    bool stream;
    enum mode mode;
    size_t size;
    double secs;
    size_t window;
};

static void die(const char *what) {
    fprintf(stderr, "shm_peer: %s: %s\n", what, strerror(errno));
    exit(1);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void *map_shared(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die("mmap");
    return p;
}

static double ns_s(uint64_t ns) {
    return (double)ns / 1e9;
}

static uint64_t rusage_ns(const struct rusage *ru) {
    return (uint64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000000ULL +
           (uint64_t)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) * 1000ULL;
}

/* waits for the child; its whole CPU time in *cpu_ns, false if it failed */
static bool reap(pid_t pid, uint64_t *cpu_ns) {
    int st = 0;
    struct rusage ru;
    while (wait4(pid, &st, 0, &ru) < 0)
        if (errno != EINTR) die("wait4");
    *cpu_ns = rusage_ns(&ru);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* ---- pingpong ---- */

/* sequence words on their own cache lines so the two directions do not share one */
struct ping_area {
    _Alignas(64) _Atomic uint64_t ping;
    _Alignas(64) _Atomic uint64_t pong;
    _Alignas(64) unsigned char ping_data[MAX_PING];
    _Alignas(64) unsigned char pong_data[MAX_PING];
};

static void ev_signal(int fd) {
    uint64_t one = 1;
    while (write(fd, &one, sizeof(one)) < 0)
        if (errno != EINTR) die("eventfd write");
}

/* waits until *seq reaches want (or STOP); returns what it saw. eventfd: one signal follows
 * each publish, so the waiter reads it first and then finds the word already published */
static uint64_t wait_seq(_Atomic uint64_t *seq, uint64_t want, enum mode m, int efd) {
    for (unsigned polls = 1;; polls++) {
        if (m == M_EVENTFD) {
            uint64_t n;
            if (read(efd, &n, sizeof(n)) < 0 && errno != EINTR) die("eventfd read");
        }
        uint64_t v = atomic_load_explicit(seq, memory_order_acquire);
        if (v == want || v == STOP) return v;
        /* a spinner that shares its CPU with the other side (a loaded 2-core host) would hold
         * it for a whole time slice: after SPIN_YIELD polls it lets the peer run */
        if (m == M_SPIN) polls % SPIN_YIELD ? cpu_relax() : (void)sched_yield();
    }
}

static int pingpong(const struct opts *o) {
    struct ping_area *a = map_shared(sizeof(*a));
    /* to_srv: the client's ping is published; to_cli: the server's pong is */
    int to_srv = eventfd(0, 0), to_cli = eventfd(0, 0);
    if (to_srv < 0 || to_cli < 0) die("eventfd");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (uint64_t i = 1;; i++) {
            if (wait_seq(&a->ping, i, o->mode, to_srv) == STOP) _exit(0);
            memcpy(a->pong_data, a->ping_data, o->size);
            atomic_store_explicit(&a->pong, i, memory_order_release);
            if (o->mode == M_EVENTFD) ev_signal(to_cli);
        }
    }
    unsigned char *buf = malloc(o->size);
    if (!buf) die("malloc");
    struct bench_lat lat;
    bench_lat_init(&lat);
    uint64_t ops = 0, cpu0 = bench_cpu_ns(), t0 = bench_now_ns(), now = t0;
    uint64_t deadline = t0 + (uint64_t)(o->secs * 1e9);
    while (now < deadline) {
        uint64_t i = ops + 1, s = now;
        memset(buf, (int)(i & 0xff), o->size);
        memcpy(a->ping_data, buf, o->size);
        atomic_store_explicit(&a->ping, i, memory_order_release);
        if (o->mode == M_EVENTFD) ev_signal(to_srv);
        if (wait_seq(&a->pong, i, o->mode, to_cli) != i) {
            fprintf(stderr, "shm_peer: the server stopped\n");
            return 1;
        }
        memcpy(buf, a->pong_data, o->size);
        if (buf[0] != (unsigned char)(i & 0xff) || buf[o->size - 1] != (unsigned char)(i & 0xff)) {
            fprintf(stderr, "shm_peer: echo %llu came back wrong\n", (unsigned long long)i);
            return 1;
        }
        now = bench_now_ns();
        bench_lat_add(&lat, now - s);
        ops++;
    }
    uint64_t cpu1 = bench_cpu_ns(), scpu = 0;
    atomic_store_explicit(&a->ping, STOP, memory_order_release);
    ev_signal(to_srv);
    if (!reap(pid, &scpu)) {
        fprintf(stderr, "shm_peer: the server failed\n");
        return 1;
    }
    double secs = ns_s(now - t0);
    printf(
        "{\"peer\":\"shm\",\"test\":\"pingpong\",\"mode\":\"%s\",\"size\":%zu,"
        "\"spin_yield_polls\":%u,\"ops\":%llu,"
        "\"seconds\":%.6f,\"bw_bytes_per_s\":%.1f,\"rate\":%.1f,",
        o->mode == M_SPIN ? "spin" : "eventfd", o->size, SPIN_YIELD, (unsigned long long)ops, secs,
        (double)ops * (double)o->size / secs, (double)ops / secs);
    bench_lat_json(stdout, &lat);
    /* server: its whole CPU (it does nothing but the ping-pong) */
    printf(",\"client_cpu_s\":%.4f,\"server_cpu_s\":%.4f}\n", ns_s(cpu1 - cpu0), ns_s(scpu));
    bench_lat_free(&lat);
    return 0;
}

/* ---- stream ---- */

/* what the writer (child) reports back through the shared header */
struct stream_report {
    _Atomic int state; /* 0 running, 1 done, 2 unavailable, 3 failed */
    int err;
    uint64_t ops, ns, cpu_ns;
};

static void *map_private(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die("mmap");
    return p;
}

static void writer(const struct opts *o, unsigned char *dst, struct stream_report *rep) {
    unsigned char *src = map_private(o->window);
    memset(src, 0x5a, o->window);                       /* faulted in before the clock starts */
    if (o->mode == M_MEMCPY) memset(dst, 0, o->window); /* the child's own page tables too */
    pid_t target = getppid();
    size_t off = 0;
    uint64_t ops = 0;
    /* one block outside the clock: learns whether process_vm_writev is allowed at all */
    if (o->mode == M_PVM) {
        struct iovec l = {src, o->size}, r = {dst, o->size};
        if (process_vm_writev(target, &l, 1, &r, 1, 0) != (ssize_t)o->size) {
            rep->err = errno;
            atomic_store(&rep->state, errno == EPERM || errno == ENOSYS ? 2 : 3);
            _exit(0);
        }
    }
    uint64_t cpu0 = bench_cpu_ns(), t0 = bench_now_ns(), now = t0;
    uint64_t deadline = t0 + (uint64_t)(o->secs * 1e9);
    while (now < deadline) {
        for (int k = 0; k < 16; k++) {
            if (o->mode == M_MEMCPY) {
                memcpy(dst + off, src + off, o->size);
            } else {
                struct iovec l = {src + off, o->size}, r = {dst + off, o->size};
                if (process_vm_writev(target, &l, 1, &r, 1, 0) != (ssize_t)o->size) {
                    rep->err = errno;
                    atomic_store(&rep->state, 3);
                    _exit(1);
                }
            }
            off += o->size;
            if (off + o->size > o->window) off = 0;
        }
        ops += 16;
        now = bench_now_ns();
    }
    rep->cpu_ns = bench_cpu_ns() - cpu0;
    rep->ops = ops;
    rep->ns = now - t0;
    atomic_store(&rep->state, 1);
    _exit(0);
}

static int stream(const struct opts *o) {
    if (o->window < o->size) die("--window smaller than --size");
    struct stream_report *rep = map_shared(sizeof(*rep));
    /* memcpy: a mapping both processes share; pvm_writev: the parent's private memory, kept
     * out of the child (MADV_DONTFORK) so no copy-on-write fault lands in the measurement */
    unsigned char *dst = o->mode == M_MEMCPY ? map_shared(o->window) : map_private(o->window);
    if (o->mode == M_PVM && madvise(dst, o->window, MADV_DONTFORK)) die("madvise");
    memset(dst, 0, o->window);
    fflush(stdout);
    uint64_t cpu0 = bench_cpu_ns();
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        writer(o, dst, rep);
    }
    uint64_t ccpu = 0;
    bool ok = reap(pid, &ccpu);
    /* the target's CPU while the writer ran (it only waits: the copy is charged to the writer) */
    uint64_t scpu = bench_cpu_ns() - cpu0;
    int state = atomic_load(&rep->state);
    const char *mode = o->mode == M_MEMCPY ? "memcpy" : "pvm_writev";
    if (state == 2) {
        printf(
            "{\"peer\":\"shm\",\"test\":\"stream\",\"mode\":\"%s\",\"size\":%zu,"
            "\"available\":false,\"error\":\"%s\"}\n",
            mode, o->size, strerror(rep->err));
        return 0;
    }
    if (!ok || state != 1) {
        fprintf(stderr, "shm_peer: the writer failed: %s\n",
                rep->err ? strerror(rep->err) : "exit status");
        return 1;
    }
    double secs = ns_s(rep->ns), bytes = (double)rep->ops * (double)o->size;
    double cpu = ns_s(rep->cpu_ns) + ns_s(scpu);
    printf(
        "{\"peer\":\"shm\",\"test\":\"stream\",\"mode\":\"%s\",\"available\":true,"
        "\"size\":%zu,\"window\":%zu,\"ops\":%llu,\"seconds\":%.6f,\"bw_bytes_per_s\":%.1f,"
        "\"bw_MiB_per_s\":%.1f,\"rate\":%.1f,",
        mode, o->size, o->window, (unsigned long long)rep->ops, secs, bytes / secs,
        bytes / secs / (1 << 20), (double)rep->ops / secs);
    printf("\"client_cpu_s\":%.4f,\"server_cpu_s\":%.4f,\"cpu_s_per_GiB\":%.4f}\n",
           ns_s(rep->cpu_ns), ns_s(scpu), cpu / (bytes / (1 << 30)));
    (void)ccpu;
    return 0;
}

static void usage(void) {
    fprintf(stderr,
            "usage: shm_peer pingpong --mode spin|eventfd [--size 8] [--seconds S]\n"
            "       shm_peer stream --mode memcpy|pvm_writev --size N [--seconds S] "
            "[--window BYTES]\n");
}

int main(int argc, char *argv[]) {
    struct opts o = {.size = 8, .secs = 3, .window = 64u << 20};
    const char *mode = NULL;
    if (argc < 2 || (strcmp(argv[1], "pingpong") && strcmp(argv[1], "stream"))) {
        usage();
        return 2;
    }
    o.stream = strcmp(argv[1], "stream") == 0;
    if (o.stream) o.size = 64u << 10;
    for (int i = 2; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--mode"))
            mode = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--size"))
            o.size = bench_parse_size(argv[++i]);
        else if (i + 1 < argc && (!strcmp(argv[i], "--seconds") || !strcmp(argv[i], "--time")))
            o.secs = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--window"))
            o.window = bench_parse_size(argv[++i]);
        else {
            fprintf(stderr, "shm_peer: unknown argument %s\n", argv[i]);
            usage();
            return 2;
        }
    }
    if (!mode) {
        fprintf(stderr, "shm_peer: --mode is required\n");
        return 2;
    }
    if (!o.stream && !strcmp(mode, "spin"))
        o.mode = M_SPIN;
    else if (!o.stream && !strcmp(mode, "eventfd"))
        o.mode = M_EVENTFD;
    else if (o.stream && !strcmp(mode, "memcpy"))
        o.mode = M_MEMCPY;
    else if (o.stream && !strcmp(mode, "pvm_writev"))
        o.mode = M_PVM;
    else {
        fprintf(stderr, "shm_peer: bad --mode %s for %s\n", mode, argv[1]);
        return 2;
    }
    if (o.size == 0 || !(o.secs > 0) || (!o.stream && o.size > MAX_PING)) {
        fprintf(stderr, "shm_peer: bad --size or --seconds\n");
        return 2;
    }
    alarm((unsigned)o.secs + 60);
    return o.stream ? stream(&o) : pingpong(&o);
}
