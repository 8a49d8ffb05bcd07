/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * read_flood.c -- a hostile peer floods reads and never reads its socket.
 *
 * usage: read_flood PORT read_write|read_only|read_write_rlimit|read_only_rlimit
 *
 * The target is a librpma server (a forked child) with a 64 MiB region. A well-behaved librpma
 * client connects first; then a raw-TCP peer (tests/hardening/wire.h) connects and, for 4 s,
 * sends frames as fast as the target takes them and never reads a byte:
 *   read_write  READ(64 MiB) + WRITE(1 byte) pairs (each write used to force a copy of every
 *               queued read answer: 64 MiB per pair);
 *   read_only   READ(64 MiB) frames only (each used to queue one more answer);
 *   *_rlimit    the same with the target under RLIMIT_AS = its size + 1 GiB (an allocation
 *               failure on an engine thread used to end the process: std::bad_alloc).
 * As a NIC bounds outstanding reads (max_dest_rd_atomic) and never buffers without bound, the
 * library may stop reading that peer's requests while answers are queued (flow control) or
 * disconnect it (LOST); either is accepted. Required:
 *   - the target's peak RSS (VmHWM) stays below its RSS before the flood + 256 MiB (+ 256 MiB
 *     more for ASan's quarantine in an ASan build), sampled throughout and checked at the end;
 *   - the target never dies (it exits 0 at the end, so no abort);
 *   - the well-behaved connection keeps working: a verified 4 KiB write + read round trip every
 *     500 ms during the flood, each within 3 s;
 *   - the target's application deletes the hostile connection within 2 s when asked.
 * The non-rlimit variants also cap the target at its size + 2 GiB, so that a library that
 * buffers without bound fails the test without exhausting the machine (not under sanitizers,
 * whose shadow memory needs the address space).
 * The raw peer speaks protocol version 2; RPMA_TEST_WIRE_VERSION=1 makes it speak version 1, to
 * run the test by hand against a library from before version 2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mem_common.h"
#include "wire.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MT_SANITIZED 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MT_SANITIZED 1
#endif
#endif
#ifdef MT_SANITIZED
#define RSS_SLACK_MIB 256 /* ASan keeps freed blocks in quarantine: up to 256 MiB */
#else
#define RSS_SLACK_MIB 0
#endif

#define REGION (64u << 20)
#define READ_LEN REGION
#define GOOD_OFF (32u << 20) /* the well-behaved client's 4 KiB window */
#define GOOD_LEN 4096
#define FLOOD_MS 4000
#define RT_EVERY_MS 500
#define RT_WAIT_MS 3000
#define RSS_BOUND_MIB (256 + RSS_SLACK_MIB)
#define DELETE_BOUND_MS 2000
#define RLIMIT_MIB 1024
#define SAFETY_MIB 2048

static const char *g_port;
static bool g_writes, g_rlimit;

/* ------------------------------------------------------------------ the target (child) */

#define SLOTS 4

static long self_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') v = strtol(line + kl + 1, NULL, 10);
    if (f) fclose(f);
    return v;
}

static void target(int ctl, void *arg) {
    (void)arg;
    struct rpma_peer *peer = it_peer_new(MT_ADDR, true);
    char *region = it_alloc(REGION), *ro = it_alloc(4096);
    it_fill(region, REGION, 0xf100d);
    struct rpma_mr_local *mr = NULL, *ro_mr = NULL;
    int all = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC |
              RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
              RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV;
    CHECK_OK(rpma_mr_reg(peer, region, REGION, all, &mr));
    CHECK_OK(rpma_mr_reg(peer, ro, 4096, RPMA_MR_USAGE_READ_SRC, &ro_mr));
    /* the layout w_conn_open expects: the region at 0, a read-only one at 21, a peer cfg at 42 */
    char pdata[43];
    CHECK_OK(rpma_mr_get_descriptor(mr, pdata));
    CHECK_OK(rpma_mr_get_descriptor(ro_mr, pdata + 21));
    struct rpma_peer_cfg *pcfg = NULL;
    CHECK_OK(rpma_peer_cfg_new(&pcfg));
    CHECK_OK(rpma_peer_cfg_get_descriptor(pcfg, pdata + 42));
    CHECK_OK(rpma_peer_cfg_delete(&pcfg));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, MT_ADDR, g_port, &ep));

#ifndef MT_SANITIZED
    long vm = self_kib("VmSize");
    CHECK(vm > 0);
    rlim_t cap = ((rlim_t)vm << 10) + ((rlim_t)(g_rlimit ? RLIMIT_MIB : SAFETY_MIB) << 20);
    struct rlimit rl = {.rlim_cur = cap, .rlim_max = cap};
    if (setrlimit(RLIMIT_AS, &rl) != 0) IT_FAIL("setrlimit: %s", strerror(errno));
    printf("target: address space capped at %ld MiB (%ld MiB now)\n", (long)(cap >> 20), vm >> 10);
#endif

    int epfd = epoll_create1(EPOLL_CLOEXEC);
    CHECK(epfd >= 0);
    int ep_fd = -1;
    CHECK_OK(rpma_ep_get_fd(ep, &ep_fd));
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = 100};
    CHECK(epoll_ctl(epfd, EPOLL_CTL_ADD, ep_fd, &e) == 0);
    e.data.u64 = 101;
    CHECK(epoll_ctl(epfd, EPOLL_CTL_ADD, ctl, &e) == 0);
    struct rpma_conn *conns[SLOTS] = {NULL};
    int ev_fds[SLOTS];
    int nconns = 0;
    mt_say(ctl, "READY");

    bool quit = false;
    while (!quit) {
        struct epoll_event evs[8];
        int n = epoll_wait(epfd, evs, 8, 1000);
        if (n < 0 && errno != EINTR) IT_FAIL("epoll_wait: %s", strerror(errno));
        for (int k = 0; k < n; k++) {
            uint64_t tag = evs[k].data.u64;
            if (tag == 100) {
                struct rpma_conn_req *req = NULL;
                int ret = rpma_ep_next_conn_req(ep, NULL, &req);
                if (ret == RPMA_E_NO_EVENT) continue;
                CHECK_OK(ret);
                CHECK(nconns < SLOTS);
                struct rpma_conn_private_data pd = {.ptr = pdata, .len = sizeof(pdata)};
                CHECK_OK(rpma_conn_req_connect(&req, &pd, &conns[nconns]));
                CHECK_OK(rpma_conn_get_event_fd(conns[nconns], &ev_fds[nconns]));
                struct epoll_event ce = {.events = EPOLLIN, .data.u64 = (uint64_t)nconns};
                CHECK(epoll_ctl(epfd, EPOLL_CTL_ADD, ev_fds[nconns], &ce) == 0);
                nconns++;
            } else if (tag == 101) {
                char msg[MT_MSG];
                mt_hear(ctl, msg, 1000);
                int slot = -1;
                if (sscanf(msg, "DELETE %d", &slot) == 1) {
                    CHECK(slot >= 0 && slot < nconns);
                    if (!conns[slot]) {
                        mt_say(ctl, "DELETED 0 lost-before");
                        continue;
                    }
                    epoll_ctl(epfd, EPOLL_CTL_DEL, ev_fds[slot], NULL);
                    long long t0 = it_now_ms();
                    (void)rpma_conn_disconnect(conns[slot]);
                    CHECK_OK(rpma_conn_delete(&conns[slot]));
                    mt_say(ctl, "DELETED %lld live", it_now_ms() - t0);
                } else if (strcmp(msg, "QUIT") == 0) {
                    quit = true;
                } else {
                    IT_FAIL("target: unknown command '%s'", msg);
                }
            } else {
                int slot = (int)tag;
                if (!conns[slot]) continue;
                enum rpma_conn_event ev;
                int ret = rpma_conn_next_event(conns[slot], &ev);
                if (ret == RPMA_E_NO_EVENT) continue;
                CHECK_OK(ret);
                if (ev == RPMA_CONN_ESTABLISHED) continue;
                /* the library ended it (LOST) or the peer closed it: let it go */
                printf("target: connection %d: %s\n", slot, rpma_utils_conn_event_2str(ev));
                epoll_ctl(epfd, EPOLL_CTL_DEL, ev_fds[slot], NULL);
                long long t0 = it_now_ms();
                (void)rpma_conn_disconnect(conns[slot]);
                CHECK_OK(rpma_conn_delete(&conns[slot]));
                printf("target: connection %d deleted in %lld ms\n", slot, it_now_ms() - t0);
            }
        }
    }
    for (int i = 0; i < nconns; i++)
        if (conns[i]) {
            (void)rpma_conn_disconnect(conns[i]);
            CHECK_OK(rpma_conn_delete(&conns[i]));
        }
    close(epfd);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_mr_dereg(&ro_mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(region);
    free(ro);
    /* the peak over the target's whole life, teardown included */
    mt_say(ctl, "BYE %ld", self_kib("VmHWM"));
}

/* ------------------------------------------------------------------ the well-behaved client */

struct good {
    struct rpma_peer *peer;
    struct rpma_conn *conn;
    struct rpma_cq *cq;
    struct rpma_mr_local *mr;
    struct rpma_mr_remote *remote;
    char *buf; /* source at 0, destination at GOOD_LEN */
    uint64_t seq;
};

/* a verified write + read round trip; its duration in ms, or -1 (with the reason printed) */
static long long good_rt(struct good *g) {
    long long t0 = it_now_ms();
    uint64_t seed = 0x600d0000 + ++g->seq;
    it_fill(g->buf, GOOD_LEN, seed);
    memset(g->buf + GOOD_LEN, 0, GOOD_LEN);
    CHECK_OK(rpma_write(g->conn, g->remote, GOOD_OFF, g->mr, 0, GOOD_LEN, RPMA_F_COMPLETION_ALWAYS,
                        (void *)1));
    CHECK_OK(rpma_read(g->conn, g->mr, GOOD_LEN, g->remote, GOOD_OFF, GOOD_LEN,
                       RPMA_F_COMPLETION_ALWAYS, (void *)2));
    for (uint64_t want = 1; want <= 2; want++) {
        struct ibv_wc wc;
        long long left = t0 + RT_WAIT_MS - it_now_ms();
        if (!it_cq_next(g->cq, &wc, left > 0 ? (int)left : 0)) {
            printf("round trip %llu: no completion within %d ms\n", (unsigned long long)g->seq,
                   RT_WAIT_MS);
            return -1;
        }
        if (wc.status != IBV_WC_SUCCESS || wc.wr_id != want) {
            printf("round trip %llu: completion wr_id %llu %s\n", (unsigned long long)g->seq,
                   (unsigned long long)wc.wr_id, mt_st(wc.status));
            return -1;
        }
    }
    if (!mt_is_pattern(g->buf + GOOD_LEN, GOOD_LEN, seed)) {
        printf("round trip %llu: read back wrong data\n", (unsigned long long)g->seq);
        return -1;
    }
    return it_now_ms() - t0;
}

/* ------------------------------------------------------------------ the flood */

struct flood {
    int fd;
    char *buf; /* whole units (pairs or reads), sent round and round */
    size_t len, off, unit;
    unsigned long long bytes;
    bool closed;
    long long closed_at;
};

static void flood_init(struct flood *f, const struct w_conn *c) {
    size_t hl = w_header_size();
    f->unit = g_writes ? 2 * hl + 1 : hl;
    size_t units = 4096;
    f->len = units * f->unit;
    f->buf = calloc(1, f->len);
    CHECK(f->buf != NULL);
    struct w_frame rd = {
        .op = W_OP_READ, .length = READ_LEN, .rkey = c->mr.rkey, .addr = c->mr.addr};
    struct w_frame wr = {.op = W_OP_WRITE, .length = 1, .rkey = c->mr.rkey, .addr = c->mr.addr};
    for (size_t u = 0; u < units; u++) {
        char *p = f->buf + u * f->unit;
        memcpy(p, &rd, hl);
        if (g_writes) {
            memcpy(p + hl, &wr, hl);
            p[2 * hl] = (char)u;
        }
    }
    f->fd = c->main_fd;
    fcntl(f->fd, F_SETFL, fcntl(f->fd, F_GETFL) | O_NONBLOCK);
}

/* pushes frames for up to ms; notices a stream the target closed */
static void flood_push(struct flood *f, int ms) {
    long long until = it_now_ms() + ms;
    while (!f->closed) {
        ssize_t n = send(f->fd, f->buf + f->off, f->len - f->off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            f->bytes += (unsigned long long)n;
            f->off = (f->off + (size_t)n) % f->len;
            if (it_now_ms() >= until) return;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN) {
            f->closed = true;
            f->closed_at = it_now_ms();
            return;
        }
        long long left = until - it_now_ms();
        if (left <= 0) return;
        struct pollfd p = {.fd = f->fd, .events = POLLOUT | POLLRDHUP};
        if (poll(&p, 1, (int)left) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
            f->closed = true;
            f->closed_at = it_now_ms();
        }
    }
}

/* reports how the target ended */
static void report_death(int st, const char *when) {
    printf("FAIL: the target died %s (%s %d)\n", when, WIFSIGNALED(st) ? "signal" : "exit status",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/*
 * The target's answer to a command within timeout_ms: 1 with it in msg, 0 on timeout (the target
 * is killed then), -1 if the target died meanwhile.
 */
static int target_answer(int ctl, int pid, char *msg, int timeout_ms, const char *what) {
    long long until = it_now_ms() + timeout_ms;
    while (it_now_ms() < until) {
        if (it_poll_fd(ctl, 100)) {
            ssize_t n = recv(ctl, msg, MT_MSG - 1, 0);
            if (n > 0) {
                msg[n] = '\0';
                return 1;
            }
        }
        int st;
        if (waitpid((pid_t)pid, &st, WNOHANG) == (pid_t)pid) {
            report_death(st, what);
            return -1;
        }
    }
    printf("FAIL: the target did not answer within %d ms %s\n", timeout_ms, what);
    kill((pid_t)pid, SIGKILL);
    waitpid((pid_t)pid, NULL, 0);
    return 0;
}

int main(int argc, char *argv[]) {
    const char *variant;
    mt_init(argc, argv, &g_port, &variant);
    g_writes = strncmp(variant, "read_write", 10) == 0;
    g_rlimit = strstr(variant, "_rlimit") != NULL;
    if ((!g_writes && strncmp(variant, "read_only", 9) != 0) ||
        (strcmp(variant + (g_writes ? 10 : 9), "") != 0 &&
         strcmp(variant + (g_writes ? 10 : 9), "_rlimit") != 0)) {
        fprintf(stderr, "usage: %s PORT read_write|read_only|read_write_rlimit|read_only_rlimit\n",
                argv[0]);
        return 2;
    }
#ifdef MT_SANITIZED
    if (g_rlimit) {
        printf("SKIP: a sanitizer's shadow memory cannot live under RLIMIT_AS\n");
        return 77;
    }
#endif
    int ctl = -1;
    int pid = mt_spawn(target, NULL, &ctl);
    char msg[MT_MSG];
    mt_expect(ctl, "READY", msg, 20000);

    /* the well-behaved connection first: the target's slot 0 */
    struct good g = {0};
    g.peer = it_peer_new(MT_ADDR, false);
    g.buf = it_alloc(2 * GOOD_LEN);
    CHECK_OK(rpma_mr_reg(g.peer, g.buf, 2 * GOOD_LEN,
                         RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &g.mr));
    g.conn = it_connect(g.peer, MT_ADDR, g_port, NULL, NULL, 0);
    g.remote = it_remote_mr(g.conn, 0);
    CHECK_OK(rpma_conn_get_cq(g.conn, &g.cq));
    if (good_rt(&g) < 0) IT_FAIL("the well-behaved connection fails before the flood");

    /* the hostile one: slot 1 */
    struct w_conn c;
    w_conn_open(&c, MT_ADDR, g_port);
    usleep(100 * 1000);
    if (good_rt(&g) < 0) IT_FAIL("the well-behaved connection fails before the flood");
    long base = mt_rss_kib(pid);
    CHECK(base > 0);
    long bound = base + (RSS_BOUND_MIB << 10);
    printf("%s: target RSS before the flood %ld MiB, bound %ld MiB; raw peer speaks version %d\n",
           variant, base >> 10, bound >> 10, w_version());

    struct flood f = {0};
    flood_init(&f, &c);
    int failures = 0, rts = 0, rt_fail = 0;
    long long rt_max = 0, start = it_now_ms(), next_rt = start + RT_EVERY_MS;
    long rss_max = base;
    bool died = false, over = false;
    while (it_now_ms() - start < FLOOD_MS) {
        flood_push(&f, 10);
        long rss = mt_rss_kib(pid);
        if (rss > rss_max) rss_max = rss;
        int st;
        if (waitpid((pid_t)pid, &st, WNOHANG) == (pid_t)pid) {
            died = true;
            printf("after %lld ms of flood:\n", it_now_ms() - start);
            report_death(st, "during the flood");
            failures++;
            break;
        }
        if (rss > bound && !over) {
            over = true;
            failures++;
            printf("FAIL: the target's RSS reached %ld MiB after %lld ms (bound %ld MiB)\n",
                   rss >> 10, it_now_ms() - start, bound >> 10);
#ifdef MT_SANITIZED
            /* no RLIMIT_AS here: stop it before it takes the machine's memory */
            kill((pid_t)pid, SIGKILL);
            waitpid((pid_t)pid, &st, 0);
            died = true;
            printf("target killed\n");
            break;
#endif
        }
        /* after a failed round trip the well-behaved connection is left alone */
        if (!rt_fail && it_now_ms() >= next_rt) {
            long long t = good_rt(&g);
            rts++;
            if (t < 0) {
                rt_fail++;
                failures++;
                printf(
                    "FAIL: a round trip on the well-behaved connection failed %lld ms into "
                    "the flood\n",
                    it_now_ms() - start);
            }
            if (t > rt_max) rt_max = t;
            next_rt = it_now_ms() + RT_EVERY_MS;
        }
    }
    long long flood_ms = it_now_ms() - start;
    unsigned long long units = f.bytes / f.unit;
    printf(
        "%s: flood of %lld ms: %llu %s sent (%llu KiB)%s; %d round trips, slowest %lld ms; "
        "target RSS max %ld MiB\n",
        variant, flood_ms, units, g_writes ? "READ+WRITE pairs" : "READ frames", f.bytes >> 10,
        f.closed ? ", then the target closed the stream" : "", rts, rt_max, rss_max >> 10);
    if (f.closed)
        printf("%s: the target dropped the hostile peer after %lld ms\n", variant,
               f.closed_at - start);

    if (!died) {
        /* the peak over the whole test, as the kernel kept it */
        long hwm = mt_hwm_kib(pid);
        printf("%s: target peak RSS (VmHWM) %ld MiB, %+ld MiB over the start of the flood\n",
               variant, hwm >> 10, (hwm - base) >> 10);
        if (hwm > bound && !over) {
            printf("FAIL: the target's peak RSS %ld MiB exceeds the bound %ld MiB\n", hwm >> 10,
                   bound >> 10);
            failures++;
            over = true;
        }
        mt_say(ctl, "DELETE 1");
        int r = target_answer(ctl, pid, msg, 15000, "while deleting the hostile connection");
        if (r <= 0) {
            died = true;
            failures++;
        } else {
            long long del_ms = 0;
            char how[64] = "";
            if (sscanf(msg, "DELETED %lld %63s", &del_ms, how) != 2)
                IT_FAIL("bad answer '%s'", msg);
            printf("%s: the target deleted the hostile connection in %lld ms (%s)\n", variant,
                   del_ms, how);
            if (del_ms > DELETE_BOUND_MS) {
                printf("FAIL: deleting the hostile connection took %lld ms (bound %d)\n", del_ms,
                       DELETE_BOUND_MS);
                failures++;
            }
        }
    }
    w_conn_close(&c);
    free(f.buf);
    if (!died && !rt_fail) {
        long long t = good_rt(&g);
        if (t < 0) {
            printf("FAIL: the well-behaved connection fails after the flood\n");
            failures++;
        }
    }
    if (!died) mt_say(ctl, "QUIT");
    (void)mt_close(&g.conn, 15000);
    CHECK_OK(rpma_mr_remote_delete(&g.remote));
    CHECK_OK(rpma_mr_dereg(&g.mr));
    CHECK_OK(rpma_peer_delete(&g.peer));
    free(g.buf);
    if (!died) {
        int r = target_answer(ctl, pid, msg, 15000, "while shutting down");
        long hwm = 0;
        if (r > 0 && sscanf(msg, "BYE %ld", &hwm) == 1) {
            printf(
                "%s: target peak RSS over its whole life %ld MiB, %+ld MiB over the start of "
                "the flood\n",
                variant, hwm >> 10, (hwm - base) >> 10);
            if (hwm > bound && !over) {
                printf("FAIL: the target's peak RSS %ld MiB exceeds the bound %ld MiB\n", hwm >> 10,
                       bound >> 10);
                failures++;
            }
        } else {
            failures++;
            died = r <= 0;
        }
    }
    if (!died) {
        int st = mt_reap_status(pid, 15000);
        if (st == -1) {
            printf("FAIL: the target did not exit when asked (killed)\n");
            failures++;
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            report_death(st, "at the end");
            failures++;
        }
    }
    if (failures) IT_FAIL("%s: %d check(s) failed", variant, failures);
    printf("%s: PASS\n", variant);
    return 0;
}
