/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * idle_conns.c -- what N idle connections cost (issue 11): a forked server accepts N connections
 * over 127.0.0.1 through the public librpma API, this process opens them, and then both leave
 * them idle for --idle seconds.
 *
 *   idle_conns [--connections N] [--idle S] [--settle S] [--port P] [--provider tcp|shm|auto]
 *
 * Memory: Pss from /proc/PID/smaps_rollup of both processes (shared memory counted once between
 * them, file pages of the library included), measured with both set up and no connection, then
 * at the end of the idle window; the delta over N is the cost of one connection. Kernel objects
 * (sockets, eventfds, epoll) are not in Pss: /proc/meminfo's Slab delta is given beside it,
 * system-wide and so only indicative on a shared machine.
 * CPU: both processes' on-CPU time over the idle window, summed over their threads
 * (/proc/PID/task/TID/schedstat, nanoseconds), and their voluntary context switches (wakeups).
 * Prints one JSON object. Exits 1 when a connection cannot be made (e.g. RPMA_PROVIDER names a
 * provider librpma lacks), with the reason on stderr.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <librpma.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_rpma.h"

struct opts {
    int n;
    double idle_s, settle_s;
    int port;
    const char *provider;
};

static void write_int(int fd, int v) {
    if (write(fd, &v, sizeof(v)) != (ssize_t)sizeof(v)) exit(1);
}

/* -1 on EOF or timeout */
static int read_int(int fd, int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int v = -1;
    if (poll(&p, 1, timeout_ms) <= 0) return -1;
    if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v)) return -1;
    return v;
}

/* ---- the server: accepts N, reports, waits for the word to close them ---- */
static void server(const struct opts *o, int up, int down) {
    bench_role = "server";
    struct ibv_context *dev = NULL;
    struct rpma_peer *peer = NULL;
    struct rpma_ep *ep = NULL;
    TRY(rpma_utils_get_ibv_context(BENCH_ADDR, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev));
    TRY(rpma_peer_new(dev, &peer));
    write_int(up, bench_listen(peer, o->port, &ep));
    struct rpma_conn **conns = calloc((size_t)o->n, sizeof(*conns));
    if (!conns) exit(1);
    for (int i = 0; i < o->n; i++) {
        struct rpma_conn_req *req = NULL;
        TRY(rpma_ep_next_conn_req(ep, NULL, &req));
        TRY(rpma_conn_req_connect(&req, NULL, &conns[i]));
        bench_expect_event(conns[i], RPMA_CONN_ESTABLISHED, i);
    }
    write_int(up, o->n);
    /* the client closes its side first; each of ours then sees CLOSED */
    if (read_int(down, -1) != 1) exit(1);
    for (int i = 0; i < o->n; i++) {
        bench_expect_event(conns[i], RPMA_CONN_CLOSED, i);
        TRY(rpma_conn_disconnect(conns[i]));
        TRY(rpma_conn_delete(&conns[i]));
    }
    TRY(rpma_ep_shutdown(&ep));
    TRY(rpma_peer_delete(&peer));
    free(conns);
    write_int(up, 0);
    _exit(0);
}

/* ---- /proc readings ---- */

struct mem {
    long pss_kib, pss_anon_kib, pss_shmem_kib, rss_kib;
};

static long field_kib(const char *text, const char *key) {
    const char *p = strstr(text, key);
    return p ? atol(p + strlen(key)) : -1;
}

static struct mem read_mem(pid_t pid) {
    char path[64], buf[4096] = {0};
    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(1);
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = 0;
    fclose(f);
    return (struct mem){field_kib(buf, "\nPss:"), field_kib(buf, "\nPss_Anon:"),
                        field_kib(buf, "\nPss_Shmem:"), field_kib(buf, "\nRss:")};
}

static long meminfo_kib(const char *key) {
    char buf[8192] = {0};
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = 0;
    fclose(f);
    char k[64];
    snprintf(k, sizeof(k), "\n%s:", key);
    return field_kib(buf, k);
}

struct cpu {
    uint64_t ns;    /* on-CPU time of the live threads */
    uint64_t vcsw;  /* voluntary context switches: sleeps, so wakeups */
    uint64_t ticks; /* utime + stime of the whole process, clock ticks */
    int threads, fds;
};

static int count_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static struct cpu read_cpu(pid_t pid) {
    struct cpu c = {0};
    char path[96], buf[4096];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        exit(1);
    }
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        c.threads++;
        snprintf(path, sizeof(path), "/proc/%d/task/%.16s/schedstat", (int)pid, e->d_name);
        FILE *f = fopen(path, "r");
        unsigned long long ns = 0;
        if (f) {
            if (fscanf(f, "%llu", &ns) == 1) c.ns += ns;
            fclose(f);
        }
        snprintf(path, sizeof(path), "/proc/%d/task/%.16s/status", (int)pid, e->d_name);
        if ((f = fopen(path, "r"))) {
            size_t n = fread(buf, 1, sizeof(buf) - 1, f);
            buf[n] = 0;
            fclose(f);
            long v = field_kib(buf, "\nvoluntary_ctxt_switches:");
            if (v > 0) c.vcsw += (uint64_t)v;
        }
    }
    closedir(d);
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = 0;
        fclose(f);
        /* fields after the command name, which may hold spaces: 14 utime, 15 stime */
        char *p = strrchr(buf, ')');
        unsigned long long ut = 0, st = 0;
        if (p &&
            sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
            c.ticks = ut + st;
    }
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    c.fds = count_dir(path);
    return c;
}

static void raise_nofile(int n) {
    /* each connection holds a few descriptors on each side (socket, eventfds, ...) */
    rlim_t want = (rlim_t)n * 8 + 256;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
        struct rlimit up = {want, want};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0) return;
        fprintf(stderr, "idle_conns: RLIMIT_NOFILE hard limit %llu < %llu; trying anyway\n",
                (unsigned long long)rl.rlim_max, (unsigned long long)want);
    }
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
}

static void json_side(const char *name, struct mem m0, struct mem m1, struct cpu c0, struct cpu c1,
                      int n, double idle_s) {
    printf(
        "\"%s\":{\"pss_kib_before\":%ld,\"pss_kib_after\":%ld,\"pss_kib_per_conn\":%.2f,"
        "\"pss_anon_kib_per_conn\":%.2f,\"pss_shmem_kib_per_conn\":%.2f,"
        "\"rss_kib_per_conn\":%.2f,\"threads\":%d,\"fds\":%d,\"idle_cpu_s\":%.6f,"
        "\"idle_cpu_ticks\":%llu,\"idle_wakeups_per_s\":%.1f}",
        name, m0.pss_kib, m1.pss_kib, (double)(m1.pss_kib - m0.pss_kib) / n,
        (double)(m1.pss_anon_kib - m0.pss_anon_kib) / n,
        (double)(m1.pss_shmem_kib - m0.pss_shmem_kib) / n, (double)(m1.rss_kib - m0.rss_kib) / n,
        c1.threads, c1.fds, (double)(c1.ns - c0.ns) / 1e9,
        (unsigned long long)(c1.ticks - c0.ticks), (double)(c1.vcsw - c0.vcsw) / idle_s);
}

int main(int argc, char *argv[]) {
    bench_prog = "idle_conns";
    struct opts o = {.n = 1000, .idle_s = 5, .settle_s = 1, .port = 47900};
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--connections"))
            o.n = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--idle"))
            o.idle_s = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--settle"))
            o.settle_s = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--port"))
            o.port = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--provider"))
            o.provider = argv[++i];
        else {
            fprintf(stderr,
                    "usage: idle_conns [--connections N] [--idle S] [--settle S] [--port P] "
                    "[--provider tcp|shm|auto]\n");
            return 2;
        }
    }
    if (o.n < 1 || !(o.idle_s > 0) || o.settle_s < 0 || o.port <= 0 || o.port > 65535) {
        fprintf(stderr, "idle_conns: bad --connections, --idle, --settle or --port\n");
        return 2;
    }
    if (o.provider) {
        if (strcmp(o.provider, "tcp") && strcmp(o.provider, "shm") && strcmp(o.provider, "auto")) {
            fprintf(stderr, "idle_conns: --provider is tcp, shm or auto, not %s\n", o.provider);
            return 2;
        }
        /* before the first librpma call; the server inherits it */
        if (!strcmp(o.provider, "auto"))
            unsetenv("RPMA_PROVIDER");
        else
            setenv("RPMA_PROVIDER", o.provider, 1);
    }
    const char *prov = getenv("RPMA_PROVIDER");
    prov = prov && *prov ? prov : "auto";
    raise_nofile(o.n);
    signal(SIGPIPE, SIG_IGN);
    /* a watchdog for the whole run: set-up and teardown of N connections included */
    alarm((unsigned)(o.idle_s + o.settle_s) + 120 + (unsigned)o.n / 20);

    int up[2], down[2];
    pid_t parent = getpid(), pid = bench_fork_server(up, down);
    if (pid < 0) return 1;
    if (pid == 0) server(&o, up[1], down[0]);
    int port = read_int(up[0], BENCH_EVENT_MS);
    int st = 0;
    if (port <= 0) {
        fprintf(stderr, "idle_conns: the server did not start\n");
        waitpid(pid, &st, 0);
        return 1;
    }
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    struct ibv_context *dev = NULL;
    struct rpma_peer *peer = NULL;
    TRY(rpma_utils_get_ibv_context(BENCH_ADDR, RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev));
    TRY(rpma_peer_new(dev, &peer));

    /* both set up, no connection yet: the baseline */
    bench_sleep_s(0.2);
    struct mem cm0 = read_mem(parent), sm0 = read_mem(pid);
    long slab0 = meminfo_kib("Slab");

    struct rpma_conn **conns = calloc((size_t)o.n, sizeof(*conns));
    if (!conns) return 1;
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < o.n; i++) {
        struct rpma_conn_req *req = NULL;
        TRY(rpma_conn_req_new(peer, BENCH_ADDR, ps, NULL, &req));
        TRY(rpma_conn_req_connect(&req, NULL, &conns[i]));
        bench_expect_event(conns[i], RPMA_CONN_ESTABLISHED, i);
    }
    if (read_int(up[0], BENCH_EVENT_MS) != o.n) {
        fprintf(stderr, "idle_conns: the server did not report %d connections\n", o.n);
        return 1;
    }
    double connect_s = (double)(bench_now_ns() - t0) / 1e9;

    bench_sleep_s(o.settle_s);
    /* our own readings sit innermost, so the reading of the server is not charged to us */
    struct cpu sc0 = read_cpu(pid), cc0 = read_cpu(parent);
    uint64_t i0 = bench_now_ns();
    bench_sleep_s(o.idle_s);
    struct cpu cc1 = read_cpu(parent), sc1 = read_cpu(pid);
    double idle = (double)(bench_now_ns() - i0) / 1e9;
    struct mem cm1 = read_mem(parent), sm1 = read_mem(pid);
    long slab1 = meminfo_kib("Slab");

    t0 = bench_now_ns();
    for (int i = 0; i < o.n; i++) {
        TRY(rpma_conn_disconnect(conns[i]));
        bench_expect_event(conns[i], RPMA_CONN_CLOSED, i);
        TRY(rpma_conn_delete(&conns[i]));
    }
    write_int(down[1], 1);
    int done = read_int(up[0], BENCH_EVENT_MS * 4);
    double teardown_s = (double)(bench_now_ns() - t0) / 1e9;
    TRY(rpma_peer_delete(&peer));
    free(conns);
    waitpid(pid, &st, 0);
    if (done != 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "idle_conns: the server did not close cleanly\n");
        return 1;
    }

    long tick = sysconf(_SC_CLK_TCK);
    double cpu = (double)(cc1.ns - cc0.ns + sc1.ns - sc0.ns) / 1e9;
    double pss = (double)(cm1.pss_kib - cm0.pss_kib + sm1.pss_kib - sm0.pss_kib) / o.n;
    printf(
        "{\"peer\":\"idle\",\"provider\":\"%s\",\"connections\":%d,\"idle_s\":%.3f,"
        "\"connect_s\":%.3f,\"teardown_s\":%.3f,\"pss_kib_per_conn\":%.2f,"
        "\"idle_cpu_s\":%.6f,\"idle_cpu_pct_of_one_core\":%.4f,"
        "\"slab_kib_per_conn_systemwide\":%.2f,\"clk_tck\":%ld,",
        prov, o.n, idle, connect_s, teardown_s, pss, cpu, 100.0 * cpu / idle,
        (double)(slab1 - slab0) / o.n, tick);
    json_side("client", cm0, cm1, cc0, cc1, o.n, idle);
    printf(",");
    json_side("server", sm0, sm1, sc0, sc1, o.n, idle);
    printf("}\n");
    return 0;
}
