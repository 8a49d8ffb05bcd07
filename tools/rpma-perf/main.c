/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * main.c -- rpma-perf command line: server, client, loopback (server forked), tour and soak.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "perf.h"

#define LOOPBACK_ADDR "127.0.0.1"
#define LOOPBACK_PORT_TRIES 64
#define TOUR_TIME_S 3.0

/* the text comes from tools/rpma-perf/cli.py, as the man page does */
static void usage(FILE *f) {
    fputs(perf_cli_usage, f);
}

static void version(void) {
    printf("rpma-perf %s\n", PERF_VERSION);
}

static int parse_size(const char *s, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    unsigned long long mul = 1;
    if (*end == 'k' || *end == 'K') mul = 1ULL << 10;
    if (*end == 'm' || *end == 'M') mul = 1ULL << 20;
    if (*end == 'g' || *end == 'G') mul = 1ULL << 30;
    if (mul != 1) end++;
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end) return -1;
    *out = v * mul;
    return 0;
}

struct cli {
    struct client_opts c;
    struct server_opts s;
    bool json;
    bool have_size;
    bool have_addr;
    bool have_op;
    bool have_iodepth;
    bool have_conns;
    bool have_server_mode;
    double interval_s;
    uint64_t seed;
    uint64_t window;
    const char *provider; /* --provider, validated; NULL: leave RPMA_PROVIDER alone */
    const char *clock;    /* --clock */
};

static int parse(int argc, char *argv[], struct cli *cli) {
    uint64_t v;
    int ch;
    optind = 2;
    while ((ch = getopt_long(argc, argv, PERF_CLI_SHORT, perf_cli_options, NULL)) != -1) {
        switch (ch) {
            case 'a':
                cli->c.addr = cli->s.addr = optarg;
                cli->have_addr = true;
                break;
            case 'p':
                cli->c.port = cli->s.port = optarg;
                if (atoi(optarg) <= 0 || atoi(optarg) > 65535) goto bad;
                break;
            case 's':
                if (parse_size(optarg, &v) || v == 0) goto bad;
                cli->c.size = cli->s.size = (size_t)v;
                cli->have_size = true;
                break;
            case 'f':
                cli->s.pmem = optarg;
                break;
            case 'o':
                if (perf_op_parse(optarg, &cli->c.op)) goto bad;
                cli->have_op = true;
                break;
            case 'd':
                if (parse_size(optarg, &v) || v < 1 || v > PERF_MAX_IODEPTH) goto bad;
                cli->c.iodepth = (int)v;
                cli->have_iodepth = true;
                break;
            case 'c':
                if (parse_size(optarg, &v) || v < 1 || v > PERF_MAX_CONNS) goto bad;
                cli->c.conns = (int)v;
                cli->have_conns = true;
                break;
            case 't':
                cli->c.time_s = strtod(optarg, NULL);
                if (!(cli->c.time_s > 0)) goto bad;
                break;
            case 'n':
                if (parse_size(optarg, &v) || v == 0) goto bad;
                cli->c.count = v;
                break;
            case 'b':
                cli->c.busy_poll = true;
                break;
            case 'j':
                cli->json = true;
                break;
            case 'v':
                cli->s.verbose = true;
                break;
            case 'i':
                cli->interval_s = strtod(optarg, NULL);
                if (!(cli->interval_s > 0)) goto bad;
                break;
            case 'S':
                if (parse_size(optarg, &v)) goto bad;
                cli->seed = v;
                break;
            case 'w':
                if (parse_size(optarg, &v) || v < 64) goto bad;
                cli->window = v;
                break;
            case 'M':
                if (strcmp(optarg, "wait") == 0)
                    cli->c.server_poll = false;
                else if (strcmp(optarg, "poll") == 0)
                    cli->c.server_poll = true;
                else
                    goto bad;
                cli->have_server_mode = true;
                break;
            case 'P':
                if (strcmp(optarg, "tcp") && strcmp(optarg, "shm") && strcmp(optarg, "verbs") &&
                    strcmp(optarg, "auto"))
                    goto bad;
                cli->provider = optarg;
                break;
            case 'C':
                if (strcmp(optarg, "auto") && strcmp(optarg, "tsc") && strcmp(optarg, "monotonic"))
                    goto bad;
                cli->clock = optarg;
                break;
            case 'h':
                usage(stdout);
                exit(0);
            case 'V':
                version();
                exit(0);
            default:
                usage(stderr);
                return -1;
        }
        continue;
    bad:
        fprintf(stderr, "rpma-perf: bad value for --%s: %s\n",
                ch == 'a'   ? "addr"
                : ch == 'p' ? "port"
                : ch == 's' ? "size"
                : ch == 'o' ? "op"
                : ch == 'd' ? "iodepth"
                : ch == 'c' ? "connections"
                : ch == 't' ? "time"
                : ch == 'i' ? "interval"
                : ch == 'S' ? "seed"
                : ch == 'w' ? "window"
                : ch == 'M' ? "server-mode"
                : ch == 'P' ? "provider (tcp, shm, verbs or auto)"
                : ch == 'C' ? "clock (auto, tsc or monotonic)"
                            : "count",
                optarg);
        return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "rpma-perf: unexpected argument: %s\n", argv[optind]);
        return -1;
    }
    return 0;
}

static int check_client(struct cli *cli) {
    struct client_opts *c = &cli->c;
    if (!cli->have_op) {
        fprintf(stderr, "rpma-perf: --op is required\n");
        return -1;
    }
    if (c->time_s > 0 && c->count) {
        fprintf(stderr, "rpma-perf: --time and --count exclude each other\n");
        return -1;
    }
    if (c->time_s <= 0 && !c->count) c->time_s = 5;
    if (!cli->have_server_mode) c->server_poll = c->busy_poll;
    if (c->op == OP_ATOMIC_WRITE) {
        if (cli->have_size && c->size != 8)
            fprintf(stderr, "rpma-perf: atomic-write always moves 8 bytes; ignoring --size\n");
        c->size = 8;
    }
    if ((uint64_t)c->size * (uint64_t)c->iodepth > (1ULL << 32)) {
        fprintf(stderr, "rpma-perf: --size x --iodepth above 4 GiB\n");
        return -1;
    }
    return 0;
}

/* ---- provider ---- */

/* RPMA_PROVIDER as librpma will read it; "auto" when unset */
static const char *provider_name(void) {
    const char *p = getenv("RPMA_PROVIDER");
    return p && *p ? p : "auto";
}

/* Sets RPMA_PROVIDER before the first librpma call, so the loopback server forked later inherits
 * it. A forced provider this librpma lacks fails every call with RPMA_E_PROVIDER and logs only to
 * syslog by default, so ask once with the address the command will use and say it plainly. */
static int apply_provider(const struct cli *cli, const char *mode) {
    if (cli->provider && strcmp(cli->provider, "auto") == 0)
        unsetenv("RPMA_PROVIDER");
    else if (cli->provider && setenv("RPMA_PROVIDER", cli->provider, 1)) {
        perror("rpma-perf: setenv RPMA_PROVIDER");
        return -1;
    }
    if (strcmp(provider_name(), "auto") == 0) return 0;
    bool remote = (strcmp(mode, "client") == 0 || strcmp(mode, "soak") == 0) && cli->have_addr;
    const char *addr = strcmp(mode, "server") == 0 ? cli->s.addr
                       : remote                    ? cli->c.addr
                                                   : LOOPBACK_ADDR;
    if (!addr) return 0; /* client without --addr: its own error follows */
    struct ibv_context *dev = NULL;
    why_begin();
    int ret = rpma_utils_get_ibv_context(
        addr, remote ? RPMA_UTIL_IBV_CONTEXT_REMOTE : RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev);
    const char *why = why_end(ret);
    if (ret != RPMA_E_PROVIDER) return 0; /* other errors: the command reports them */
    fprintf(stderr,
            "rpma-perf: provider '%s' (RPMA_PROVIDER) is not available in this librpma for %s: "
            "%s\n",
            provider_name(), addr, why);
    return -1;
}

/* ---- output ---- */

static void fmt_bw(char *buf, size_t n, double bps) {
    if (bps >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.2f GiB/s", bps / (1024.0 * 1024 * 1024));
    else
        snprintf(buf, n, "%.1f MiB/s", bps / (1024.0 * 1024));
}

static void fmt_ns(char *buf, size_t n, uint64_t ns) {
    if (ns >= 10000000)
        snprintf(buf, n, "%.1f ms", (double)ns / 1e6);
    else if (ns >= 1000000)
        snprintf(buf, n, "%.2f ms", (double)ns / 1e6);
    else
        snprintf(buf, n, "%.1f us", (double)ns / 1e3);
}

static void fmt_size(char *buf, size_t n, size_t size) {
    if (size >= (1u << 20) && size % (1u << 20) == 0)
        snprintf(buf, n, "%zu MiB", size >> 20);
    else if (size >= 1024 && size % 1024 == 0)
        snprintf(buf, n, "%zu KiB", size >> 10);
    else
        snprintf(buf, n, "%zu B", size);
}

static void print_human(const struct client_opts *o, const struct client_result *r,
                        const char *mode) {
    char sz[32], bw[32], p50[32], p99[32], p999[32], mx[32], mean[32];
    fmt_size(sz, sizeof(sz), o->size);
    double secs = r->seconds > 0 ? r->seconds : 1e-9;
    fmt_bw(bw, sizeof(bw), (double)r->bytes / secs);
    fmt_ns(p50, sizeof(p50), hist_pct(&r->lat, 50));
    fmt_ns(p99, sizeof(p99), hist_pct(&r->lat, 99));
    fmt_ns(p999, sizeof(p999), hist_pct(&r->lat, 99.9));
    fmt_ns(mx, sizeof(mx), r->lat.max_ns);
    fmt_ns(mean, sizeof(mean), r->lat.count ? r->lat.sum_ns / r->lat.count : 0);
    printf("rpma-perf %s: %s %s, iodepth %d, %d connection%s, %s%s, %s:%s\n", mode,
           perf_op_name(o->op), sz, o->iodepth, o->conns, o->conns == 1 ? "" : "s",
           o->busy_poll ? "busy-poll" : "blocking",
           !perf_op_answered(o->op) ? ""
           : o->server_poll         ? ", server busy-polls"
                                    : ", server waits",
           o->addr, o->port);
    printf("  operations  %llu in %.3f s\n", (unsigned long long)r->ops, r->seconds);
    printf("  bandwidth   %s (%.1f MB/s)\n", bw, (double)r->bytes / secs / 1e6);
    printf("  IOPS        %.0f\n", (double)r->ops / secs);
    printf("  latency     p50 %s  p99 %s  p99.9 %s  max %s  mean %s\n", p50, p99, p999, mx, mean);
    printf("              (%s)\n", o->iodepth == 1 ? "per operation, post to completion"
                                                   : "per operation, post to completion with "
                                                     "the queue full");
    printf("  CPU         client %.2f s (%.0f%% of one core)", r->client_cpu_s,
           100.0 * r->client_cpu_s / secs);
    if (r->server_cpu_known)
        printf(", server %.2f s (%.0f%%)\n", r->server_cpu_s, 100.0 * r->server_cpu_s / secs);
    else
        printf(", server unknown\n");
    if (r->verified_bytes)
        printf("  data check  ok (%llu bytes compared)\n", (unsigned long long)r->verified_bytes);
    else
        printf("  data check  none for this operation\n");
}

static void print_json_obj(FILE *f, const struct client_opts *o, const struct client_result *r,
                           const char *mode) {
    double secs = r->seconds > 0 ? r->seconds : 1e-9;
    fprintf(f,
            "{\"mode\":\"%s\",\"provider\":\"%s\",\"clock\":\"%s\",\"op\":\"%s\",\"addr\":\"%s\","
            "\"port\":\"%s\","
            "\"size\":%zu,"
            "\"iodepth\":%d,\"connections\":%d,\"busy_poll\":%s,\"server_busy_poll\":%s,"
            "\"ops\":%llu,\"bytes\":%llu,"
            "\"seconds\":%.6f,\"seconds_monotonic\":%.6f,"
            "\"bw_bytes_per_s\":%.1f,\"bw_MiB_per_s\":%.3f,\"iops\":%.1f,"
            "\"lat_us\":{\"min\":%.3f,\"mean\":%.3f,\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,"
            "\"max\":%.3f},\"client_cpu_s\":%.4f,",
            mode, provider_name(), perf_clock_name(), perf_op_name(o->op), o->addr, o->port,
            o->size, o->iodepth, o->conns, o->busy_poll ? "true" : "false",
            perf_op_answered(o->op) ? (o->server_poll ? "true" : "false") : "null",
            (unsigned long long)r->ops, (unsigned long long)r->bytes, r->seconds,
            r->seconds_monotonic, (double)r->bytes / secs, (double)r->bytes / secs / (1 << 20),
            (double)r->ops / secs, r->lat.count ? (double)r->lat.min_ns / 1e3 : 0.0,
            r->lat.count ? (double)r->lat.sum_ns / (double)r->lat.count / 1e3 : 0.0,
            (double)hist_pct(&r->lat, 50) / 1e3, (double)hist_pct(&r->lat, 99) / 1e3,
            (double)hist_pct(&r->lat, 99.9) / 1e3, (double)r->lat.max_ns / 1e3, r->client_cpu_s);
    if (r->server_cpu_known)
        fprintf(f, "\"server_cpu_s\":%.4f,", r->server_cpu_s);
    else
        fprintf(f, "\"server_cpu_s\":null,");
    fprintf(f, "\"verified\":%s,\"verified_bytes\":%llu}", r->verified ? "true" : "false",
            (unsigned long long)r->verified_bytes);
}

/* ---- loopback: a forked server ---- */

struct child {
    pid_t pid;
    char port[16];
};

static int fork_server(const char *port, size_t size, const char *pmem, struct child *ch) {
    int fds[2];
    if (pipe(fds)) {
        perror("rpma-perf: pipe");
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("rpma-perf: fork");
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        /* the server must not outlive the command */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1);
        struct server_opts so = {.addr = LOOPBACK_ADDR,
                                 .port = port,
                                 .size = size,
                                 .pmem = pmem,
                                 .ready_fd = fds[1],
                                 .port_tries = LOOPBACK_PORT_TRIES};
        _exit(perf_server(&so));
    }
    close(fds[1]);
    int p = 0;
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    ssize_t n = -1;
    if (poll(&pfd, 1, PERF_EVENT_MS) > 0) {
        do n = read(fds[0], &p, sizeof(p));
        while (n < 0 && errno == EINTR);
    }
    close(fds[0]);
    ch->pid = pid;
    if (n != (ssize_t)sizeof(p) || p <= 0) {
        fprintf(stderr, "rpma-perf: the loopback server did not start\n");
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    snprintf(ch->port, sizeof(ch->port), "%d", p);
    return 0;
}

/* stops the server; returns its exit status */
static int stop_server(struct child *ch) {
    int status = 0;
    kill(ch->pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        pid_t r = waitpid(ch->pid, &status, WNOHANG);
        if (r == ch->pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        usleep(50000);
    }
    fprintf(stderr, "rpma-perf: the loopback server did not stop; killing it\n");
    kill(ch->pid, SIGKILL);
    waitpid(ch->pid, &status, 0);
    return 128;
}

static size_t loopback_region(const struct client_opts *o) {
    uint64_t need = (uint64_t)o->conns * (uint64_t)o->iodepth * o->size + 4096 * (uint64_t)o->conns;
    uint64_t size = PERF_DEFAULT_REGION;
    while (size < need && size < (1ULL << 30)) size <<= 1;
    return (size_t)size;
}

static int run_loopback(struct cli *cli) {
    struct client_opts *c = &cli->c;
    struct child ch;
    if (fork_server(c->port, loopback_region(c), cli->s.pmem, &ch)) return 1;
    c->addr = LOOPBACK_ADDR;
    c->port = ch.port;
    struct client_result r;
    int rc = perf_client(c, &r);
    int src = stop_server(&ch);
    if (rc) return rc;
    if (cli->json) {
        print_json_obj(stdout, c, &r, "loopback");
        printf("\n");
    } else {
        print_human(c, &r, "loopback");
    }
    if (src) {
        fprintf(stderr, "rpma-perf: the loopback server exited with %d\n", src);
        return 1;
    }
    return 0;
}

/* ---- tour ---- */

struct tour_step {
    const char *title;
    enum perf_op op;
    size_t size;
    int iodepth;
};

static const struct tour_step tour_steps[] = {
    {"write bandwidth, 64 KiB x 32", OP_WRITE, 64 << 10, 32},
    {"write+flush latency, 8 B", OP_WRITE_FLUSH, 8, 1},
    {"read bandwidth, 64 KiB x 32", OP_READ, 64 << 10, 32},
    {"read latency, 8 B", OP_READ, 8, 1},
};
#define TOUR_STEPS (sizeof(tour_steps) / sizeof(tour_steps[0]))

static int run_tour(struct cli *cli) {
    double t = cli->c.time_s > 0 ? cli->c.time_s : TOUR_TIME_S;
    struct child ch;
    if (fork_server(cli->c.port, PERF_DEFAULT_REGION, NULL, &ch)) return 1;
    struct client_result rs[TOUR_STEPS];
    struct client_opts os[TOUR_STEPS];
    int rc = 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (!cli->json)
        printf("rpma-perf tour: rpma over loopback (provider: %s), %ld CPUs, %.0f s per step\n",
               provider_name(), ncpu, t);
    for (size_t i = 0; i < TOUR_STEPS && rc == 0; i++) {
        os[i] = (struct client_opts){.addr = LOOPBACK_ADDR,
                                     .port = ch.port,
                                     .op = tour_steps[i].op,
                                     .size = tour_steps[i].size,
                                     .iodepth = tour_steps[i].iodepth,
                                     .conns = 1,
                                     .time_s = t,
                                     .progress = cli->c.progress};
        rc = perf_client(&os[i], &rs[i]);
    }
    int src = stop_server(&ch);
    if (rc) return rc;
    if (cli->json) {
        printf("[");
        for (size_t i = 0; i < TOUR_STEPS; i++) {
            if (i) printf(",\n ");
            print_json_obj(stdout, &os[i], &rs[i], "tour");
        }
        printf("]\n");
    } else {
        printf("\n  %-30s %12s %10s %10s %10s %10s %9s %9s\n", "step", "bandwidth", "IOPS", "p50",
               "p99", "p99.9", "cli CPU", "srv CPU");
        for (size_t i = 0; i < TOUR_STEPS; i++) {
            const struct client_result *r = &rs[i];
            char bw[32], p50[32], p99[32], p999[32];
            double secs = r->seconds > 0 ? r->seconds : 1e-9;
            fmt_bw(bw, sizeof(bw), (double)r->bytes / secs);
            fmt_ns(p50, sizeof(p50), hist_pct(&r->lat, 50));
            fmt_ns(p99, sizeof(p99), hist_pct(&r->lat, 99));
            fmt_ns(p999, sizeof(p999), hist_pct(&r->lat, 99.9));
            printf("  %-30s %12s %10.0f %10s %10s %10s %8.0f%% %8.0f%%\n", tour_steps[i].title, bw,
                   (double)r->ops / secs, p50, p99, p999, 100.0 * r->client_cpu_s / secs,
                   r->server_cpu_known ? 100.0 * r->server_cpu_s / secs : 0.0);
        }
        printf("\n  CPU is the share of one core over the step; every byte moved was checked.\n");
    }
    if (src) {
        fprintf(stderr, "rpma-perf: the loopback server exited with %d\n", src);
        return 1;
    }
    return 0;
}

/* ---- soak ---- */

static int run_soak(struct cli *cli) {
    struct soak_opts so = {
        .addr = cli->have_addr ? cli->c.addr : LOOPBACK_ADDR,
        .port = cli->c.port,
        .conns = cli->have_conns ? cli->c.conns : 4,
        .iodepth = cli->have_iodepth ? cli->c.iodepth : 8,
        .max_size = cli->have_size ? cli->c.size : 64 << 10,
        .window = cli->window ? cli->window : 4 << 20,
        .time_s = cli->c.time_s > 0 ? cli->c.time_s : 60,
        .interval_s = cli->interval_s > 0 ? cli->interval_s : 10,
        .seed = cli->seed ? cli->seed : (uint64_t)perf_now_ns(),
    };
    if (cli->c.count) {
        fprintf(stderr, "rpma-perf: soak runs for --time, not --count\n");
        return 2;
    }
    if (so.max_size > so.window) so.max_size = (size_t)so.window;
    if ((uint64_t)so.max_size * (uint64_t)so.iodepth > (1ULL << 32)) {
        fprintf(stderr, "rpma-perf: --size x --iodepth above 4 GiB\n");
        return 2;
    }
    if (cli->have_addr) return perf_soak(&so);
    /* a server of our own, with exactly the windows asked for */
    uint64_t region = so.window * (uint64_t)so.conns;
    if (region > (1ULL << 30)) {
        fprintf(stderr, "rpma-perf: --window x --connections above 1 GiB\n");
        return 2;
    }
    struct child ch;
    if (fork_server(cli->c.port, (size_t)region, cli->s.pmem, &ch)) return 1;
    so.port = ch.port;
    int rc = perf_soak(&so);
    int src = stop_server(&ch);
    if (src) {
        fprintf(stderr, "rpma-perf: the loopback server exited with %d\n", src);
        if (!rc) rc = 1;
    }
    return rc;
}

int main(int argc, char *argv[]) {
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
        version();
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    struct cli cli = {.c = {.addr = NULL,
                            .port = PERF_CLI_DEFAULT_PORT,
                            .op = OP_WRITE,
                            .size = 4096,
                            .iodepth = 1,
                            .conns = 1},
                      .s = {.addr = "0.0.0.0",
                            .port = PERF_CLI_DEFAULT_PORT,
                            .size = PERF_DEFAULT_REGION,
                            .ready_fd = -1,
                            .verbose = true},
                      .clock = "auto"};
    const char *mode = argv[1];
    if (parse(argc, argv, &cli)) return 2;
    /* the server times no operation: it need not spend the counter's 50 ms calibration */
    if (strcmp(mode, "server") != 0 && perf_clock_init(cli.clock)) return 1;
    /* what librpma logs about a failure goes into our error lines (why.h) */
    why_init("rpma-perf");
    cli.c.progress = !cli.json && isatty(STDERR_FILENO);
    if (apply_provider(&cli, mode)) return 1;

    if (strcmp(mode, "server") == 0) {
        if (!cli.have_addr) cli.s.addr = "0.0.0.0";
        return perf_server(&cli.s);
    }
    if (strcmp(mode, "client") == 0) {
        if (!cli.have_addr) {
            fprintf(stderr, "rpma-perf: client needs --addr\n");
            return 2;
        }
        if (check_client(&cli)) return 2;
        struct client_result r;
        int rc = perf_client(&cli.c, &r);
        if (rc) return rc;
        if (cli.json) {
            print_json_obj(stdout, &cli.c, &r, "client");
            printf("\n");
        } else {
            print_human(&cli.c, &r, "client");
        }
        return 0;
    }
    if (strcmp(mode, "loopback") == 0) {
        if (check_client(&cli)) return 2;
        return run_loopback(&cli);
    }
    if (strcmp(mode, "tour") == 0) return run_tour(&cli);
    if (strcmp(mode, "soak") == 0) return run_soak(&cli);
    fprintf(stderr, "rpma-perf: unknown mode '%s'\n", mode);
    usage(stderr);
    return 2;
}
