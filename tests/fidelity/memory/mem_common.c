/* SPDX-License-Identifier: BSD-3-Clause */
/* mem_common.c -- helpers for the memory-ownership fidelity tests */
#define _GNU_SOURCE
#include "mem_common.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

void mt_init(int argc, char *argv[], const char **port, const char **variant) {
    alarm(MT_ALARM_S);
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_WARNING));
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s PORT [VARIANT]\n", argv[0]);
        exit(2);
    }
    *port = argv[1];
    *variant = argc == 3 ? argv[2] : "";
}

int mt_spawn(void (*fn)(int ctl, void *arg), void *arg, int *ctl) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        IT_FAIL("socketpair: %s", strerror(errno));
    pid_t parent = getpid();
    int pid = it_fork();
    if (pid == 0) {
        close(sv[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1); /* the parent is gone already */
        alarm(MT_ALARM_S);
        fn(sv[1], arg);
        fflush(stdout);
        fflush(stderr);
        exit(0);
    }
    close(sv[1]);
    *ctl = sv[0];
    return pid;
}

int mt_reap_status(int pid, int timeout_ms) {
    long long deadline = it_now_ms() + timeout_ms;
    int status = 0;
    for (;;) {
        pid_t r = waitpid((pid_t)pid, &status, WNOHANG);
        if (r == (pid_t)pid) return status;
        if (r < 0 && errno != EINTR) IT_FAIL("waitpid: %s", strerror(errno));
        if (it_now_ms() > deadline) {
            kill((pid_t)pid, SIGKILL);
            waitpid((pid_t)pid, &status, 0);
            return -1;
        }
        usleep(10000);
    }
}

void mt_reap(int pid, int timeout_ms) {
    int st = mt_reap_status(pid, timeout_ms);
    if (st == -1) IT_FAIL("child %d still running after %d ms (killed)", pid, timeout_ms);
    if (WIFSIGNALED(st)) IT_FAIL("child %d ended by signal %d", pid, WTERMSIG(st));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        IT_FAIL("child %d exited with status %d", pid, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

void mt_say(int ctl, const char *fmt, ...) {
    char buf[MT_MSG];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    CHECK(n >= 0 && n < MT_MSG);
    while (send(ctl, buf, (size_t)n, MSG_NOSIGNAL) < 0)
        if (errno != EINTR) IT_FAIL("control send '%s': %s", buf, strerror(errno));
}

void mt_hear(int ctl, char *buf, int timeout_ms) {
    if (!it_poll_fd(ctl, timeout_ms)) IT_FAIL("no control message within %d ms", timeout_ms);
    ssize_t n;
    while ((n = recv(ctl, buf, MT_MSG - 1, 0)) < 0)
        if (errno != EINTR) IT_FAIL("control recv: %s", strerror(errno));
    if (n == 0) IT_FAIL("the other role ended (control socket closed)");
    buf[n] = '\0';
}

const char *mt_expect(int ctl, const char *word, char *buf, int timeout_ms) {
    mt_hear(ctl, buf, timeout_ms);
    size_t wl = strlen(word);
    if (strncmp(buf, word, wl) != 0 || (buf[wl] != '\0' && buf[wl] != ' '))
        IT_FAIL("control message '%s', expected '%s ...'", buf, word);
    return buf[wl] ? buf + wl + 1 : buf + wl;
}

void mt_stop(int pid) {
    if (kill((pid_t)pid, SIGSTOP) != 0) IT_FAIL("SIGSTOP %d: %s", pid, strerror(errno));
    int st = 0;
    while (waitpid((pid_t)pid, &st, WUNTRACED) < 0)
        if (errno != EINTR) IT_FAIL("waitpid(WUNTRACED): %s", strerror(errno));
    if (!WIFSTOPPED(st)) IT_FAIL("child %d did not stop (status %d)", pid, st);
}

void mt_cont(int pid) {
    if (kill((pid_t)pid, SIGCONT) != 0) IT_FAIL("SIGCONT %d: %s", pid, strerror(errno));
}

void *mt_map(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) IT_FAIL("mmap(%zu): %s", len, strerror(errno));
    return p;
}

void mt_unmap(void *p, size_t len) {
    if (munmap(p, len) != 0) IT_FAIL("munmap: %s", strerror(errno));
}

static uint8_t *pattern(size_t len, uint64_t seed) {
    uint8_t *p = malloc(len ? len : 1);
    if (!p) IT_FAIL("malloc(%zu) failed", len);
    it_fill(p, len, seed);
    return p;
}

bool mt_is_pattern(const void *buf, size_t len, uint64_t seed) {
    return it_verify(buf, len, seed) < 0;
}

size_t mt_count_bytes(const void *buf, size_t len, uint64_t seed) {
    uint8_t *ref = pattern(len, seed);
    const uint8_t *b = buf;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += b[i] == ref[i];
    free(ref);
    return n;
}

size_t mt_count_words(const void *buf, size_t len, uint64_t seed, uint64_t other) {
    uint8_t *ref = pattern(len, seed), *oth = pattern(len, other);
    const uint8_t *b = buf;
    size_t n = 0;
    for (size_t i = 0; i + 8 <= len; i += 8)
        if (memcmp(b + i, ref + i, 8) == 0 && memcmp(ref + i, oth + i, 8) != 0) n++;
    free(ref);
    free(oth);
    return n;
}

long mt_first_diff(const void *a, const void *b, size_t len) {
    if (memcmp(a, b, len) == 0) return -1;
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < len; i++)
        if (x[i] != y[i]) return (long)i;
    return -1;
}

bool mt_all_bytes(const void *buf, size_t len, uint8_t c) {
    const uint8_t *b = buf;
    for (size_t i = 0; i < len; i++)
        if (b[i] != c) return false;
    return true;
}

void mt_cq_get(struct rpma_cq *cq, struct ibv_wc *wc, int timeout_ms, long long *at) {
    if (!it_cq_next(cq, wc, timeout_ms)) IT_FAIL("no completion within %d ms", timeout_ms);
    if (at) *at = it_now_ms();
}

enum rpma_conn_event mt_next_event(struct rpma_conn *conn, int timeout_ms) {
    int fd = -1;
    CHECK_OK(rpma_conn_get_event_fd(conn, &fd));
    if (!it_poll_fd(fd, timeout_ms)) IT_FAIL("no connection event within %d ms", timeout_ms);
    enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    CHECK_OK(rpma_conn_next_event(conn, &ev));
    return ev;
}

enum rpma_conn_event mt_close(struct rpma_conn **conn, int timeout_ms) {
    (void)rpma_conn_disconnect(*conn); /* the connection may be gone already */
    enum rpma_conn_event ev = mt_next_event(*conn, timeout_ms);
    if (ev != RPMA_CONN_CLOSED && ev != RPMA_CONN_LOST)
        IT_FAIL("connection event %s while closing", rpma_utils_conn_event_2str(ev));
    CHECK_OK(rpma_conn_delete(conn));
    return ev;
}

struct rpma_conn_cfg *mt_cfg(uint32_t queue) {
    struct rpma_conn_cfg *cfg = NULL;
    CHECK_OK(rpma_conn_cfg_new(&cfg));
    CHECK_OK(rpma_conn_cfg_set_sq_size(cfg, queue));
    CHECK_OK(rpma_conn_cfg_set_rq_size(cfg, queue));
    CHECK_OK(rpma_conn_cfg_set_cq_size(cfg, 2 * queue));
    return cfg;
}

const char *mt_st(enum ibv_wc_status st) {
    const char *s = it_wc_status_str(st);
    return strncmp(s, "IBV_WC_", 7) == 0 ? s + 7 : s;
}

void mt_tally_init(struct mt_tally *t, enum ibv_wc_status expected, char letter) {
    memset(t, 0, sizeof(*t));
    t->expected = t->alt = expected;
    t->letter = letter;
    t->first_err = -1;
}

void mt_tally_local(struct mt_tally *t, char letter) {
    mt_tally_init(t, IBV_WC_LOC_PROT_ERR, letter);
    t->alt = IBV_WC_LOC_QP_OP_ERR;
}

bool mt_is_local_prot(enum ibv_wc_status st) {
    return st == IBV_WC_LOC_PROT_ERR || st == IBV_WC_LOC_QP_OP_ERR;
}

bool mt_tally_add(struct mt_tally *t, int k, enum ibv_wc_status st, const char *what) {
    CHECK(k >= 0 && k < MT_TALLY_MAX);
    t->line[k] = st == IBV_WC_SUCCESS                ? 'S'
                 : st == t->expected || st == t->alt ? t->letter
                 : st == IBV_WC_WR_FLUSH_ERR         ? 'f'
                                                     : '?';
    t->line[k + 1] = '\0';
    if (st == IBV_WC_SUCCESS) {
        t->ok++;
        if (t->first_err >= 0) {
            printf("FAIL %s completed SUCCESS after completion %d failed\n", what, t->first_err);
            t->failures++;
        }
        return true;
    }
    if (t->first_err < 0) {
        t->first_err = k;
        t->first_st = st;
    }
    if (st == t->expected || st == t->alt) {
        t->errs++;
    } else if (st == IBV_WC_WR_FLUSH_ERR) {
        t->flushed++;
    } else {
        t->other++;
        printf("FAIL %s: status %s, expected %s or WR_FLUSH_ERR\n", what, mt_st(st),
               mt_st(t->expected));
        t->failures++;
    }
    return false;
}

const char *mt_tally_err(const struct mt_tally *t) {
    bool alt = t->first_err >= 0 && t->first_st == t->alt;
    return mt_st(alt ? t->alt : t->expected);
}

int mt_tally_end(struct mt_tally *t, const char *round) {
    if (t->errs > 1) {
        printf(
            "FAIL %s: %d completions %s; after the first the queue pair is in the error state "
            "(WR_FLUSH_ERR)\n",
            round, t->errs, mt_st(t->expected));
        t->failures++;
    }
    return t->failures;
}

static long proc_status_kib(int pid, const char *key) {
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtol(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

long mt_rss_kib(int pid) {
    return proc_status_kib(pid, "VmRSS");
}

long mt_hwm_kib(int pid) {
    return proc_status_kib(pid, "VmHWM");
}
