/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * persist_rounds.c -- many PERSISTENT flushes at random places of a file-backed MAP_SHARED
 * region, the target SIGKILLed right after the last completion, over several target lifetimes.
 *
 * usage: persist_rounds PORT DIR
 *
 * The test process keeps an unlinked file in DIR. For each of CYCLES cycles it forks a target that
 * maps the file MAP_SHARED, registers it with FLUSH_TYPE_PERSISTENT and serves. The test process
 * connects and first reads the whole file remotely: it must hold everything made persistent by
 * the previous targets. Then ROUNDS rounds: a write of random length at a random offset, a
 * PERSISTENT flush of exactly that range, wait for the flush's completion, and right then:
 *   - if the machine lets us read page flags (root: /proc/self/pagemap gives page frame numbers,
 *     /proc/kpageflags their flags), the file's page-cache pages of that range must be clean
 *     (KPF_DIRTY unset), i.e. written back to the file system by the flush's msync. A write
 *     without a flush must leave its page dirty first (a control that shows the probe works).
 * After the last completion the target is SIGKILLed, and the file, read with pread, must equal
 * the shadow copy of everything written, byte for byte (zeros elsewhere).
 *
 * Without page flags, the kill alone cannot tell flushed from unflushed data (the page cache
 * outlives the process); the unit test PersistTest in tests/unit/test_persist.cc shows the msync
 * range directly.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "wire.h"

#define FILE_SIZE (4u << 20)
#define MAX_LEN (64u * 1024)
#define CYCLES 3
#define ROUNDS 100
#define PD_LEN (IT_MR_DESC_SIZE + IT_PCFG_DESC_SIZE)
#define KPF_DIRTY 4

static const char *ADDR = "127.0.0.1";
static long g_page;

/* ------------------------------------------------------------------ the target */

static void target(int fd, const char *port, int ready_fd) {
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_WARNING));
    void *map = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) IT_FAIL("mmap failed");
    struct rpma_peer *peer = it_peer_new(ADDR, true);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(
        peer, map, FILE_SIZE,
        RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT,
        &mr));
    struct rpma_peer_cfg *pcfg = NULL;
    CHECK_OK(rpma_peer_cfg_new(&pcfg));
    CHECK_OK(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true));
    char pdata[PD_LEN];
    CHECK_OK(rpma_mr_get_descriptor(mr, pdata));
    CHECK_OK(rpma_peer_cfg_get_descriptor(pcfg, pdata + IT_MR_DESC_SIZE));
    struct rpma_ep *ep = NULL;
    for (int i = 0; rpma_ep_listen(peer, ADDR, port, &ep) != 0; i++) {
        if (i == 50) IT_FAIL("cannot listen on %s", port); /* port briefly taken: ephemeral range */
        usleep(100 * 1000);
    }
    CHECK(write(ready_fd, "r", 1) == 1);
    struct rpma_conn_req *req = it_next_req(ep, NULL);
    struct rpma_conn *conn = it_accept(&req, pdata, sizeof(pdata));
    (void)conn;
    it_wait_for_death(50); /* the test kills this process right after a flush */
}

/* ------------------------------------------------------------------ page flags */

static int g_kpf = -1, g_pagemap = -1;
static const char *g_view; /* the test process's own read-only mapping of the file */

/* flags of the page-cache page behind offset off of the file; false if unknown */
static bool page_flags(size_t off, uint64_t *flags) {
    volatile char touch = g_view[off]; /* map the page into our page table */
    (void)touch;
    uint64_t ent = 0;
    uintptr_t va = (uintptr_t)(g_view + off);
    if (pread(g_pagemap, &ent, 8, (off_t)(va / (uintptr_t)g_page * 8)) != 8) return false;
    uint64_t pfn = ent & ((1ULL << 55) - 1);
    if (!(ent >> 63) || pfn == 0) return false; /* not present, or frame numbers hidden */
    return pread(g_kpf, flags, 8, (off_t)(pfn * 8)) == 8;
}

/* the first dirty page of [off, off + len), or -1 */
static long first_dirty(size_t off, size_t len) {
    size_t p0 = off / (size_t)g_page, p1 = (off + len - 1) / (size_t)g_page;
    for (size_t p = p0; p <= p1; p++) {
        uint64_t fl = 0;
        if (!page_flags(p * (size_t)g_page, &fl)) IT_FAIL("page flags became unreadable");
        if (fl & (1ULL << KPF_DIRTY)) return (long)p;
    }
    return -1;
}

/* g_view is the parent's mapping, inherited; pagemap must be this process's own */
static void probe_open(void) {
    g_pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    g_kpf = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
    uint64_t fl;
    if (g_pagemap < 0 || g_kpf < 0 || !page_flags(0, &fl)) {
        printf("page flags are not readable here (needs root): dirtiness is not checked\n");
        if (g_kpf >= 0) close(g_kpf);
        g_kpf = -1;
    }
}

/* ------------------------------------------------------------------ the test process */

/* shared between the parent and each cycle's client process */
struct shared {
    uint8_t shadow[FILE_SIZE];      /* what the file must hold */
    uint8_t shadow_next[FILE_SIZE]; /* the same, with the current cycle's writes */
    int clean_checks;
    long long flush_ms;
    bool probe;
};

/* one cycle's client: its own process, so that no process forks with the library in use */
static void client(int cycle, const char *port, int target_pid, struct shared *sh) {
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_WARNING));
    probe_open();
    sh->probe = g_kpf >= 0;
    struct rpma_peer *peer = it_peer_new(ADDR, false);
    char *src = it_alloc(MAX_LEN), *back = it_alloc(FILE_SIZE);
    struct rpma_mr_local *src_mr = NULL, *back_mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, src, MAX_LEN, RPMA_MR_USAGE_WRITE_SRC, &src_mr));
    CHECK_OK(rpma_mr_reg(peer, back, FILE_SIZE, RPMA_MR_USAGE_READ_DST, &back_mr));
    struct rpma_conn *conn = it_connect(peer, ADDR, port, NULL, NULL, 0);
    struct rpma_mr_remote *dst = it_remote_mr(conn, 0);
    it_apply_remote_pcfg(conn, IT_MR_DESC_SIZE);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    /* the new target's region is the file: it holds what the earlier targets made persistent */
    CHECK_OK(rpma_read(conn, back_mr, 0, dst, 0, FILE_SIZE, RPMA_F_COMPLETION_ALWAYS, (void *)1));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)1);
    for (size_t i = 0; i < FILE_SIZE; i++)
        if ((uint8_t)back[i] != sh->shadow[i])
            IT_FAIL("cycle %d: the new target's region differs from the file at %zu", cycle, i);

    if (g_kpf >= 0 && cycle == 0) {
        /* control: a write without a flush leaves a dirty page, which the probe must see */
        bool seen = false;
        for (int k = 0; k < 4 && !seen; k++) {
            size_t off = FILE_SIZE - (size_t)(k + 1) * (size_t)g_page;
            w_random(src, 64);
            memcpy(sh->shadow_next + off, src, 64);
            CHECK_OK(
                rpma_write(conn, dst, off, src_mr, 0, 64, RPMA_F_COMPLETION_ALWAYS, (void *)2));
            it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)2);
            seen = first_dirty(off, 64) >= 0;
        }
        if (!seen) IT_FAIL("control: a written, unflushed page never showed as dirty");
    }

    for (int round = 0; round < ROUNDS; round++) {
        size_t len = 1 + (size_t)(w_random64() % MAX_LEN);
        size_t off = (size_t)(w_random64() % (FILE_SIZE - len + 1));
        w_random(src, len);
        memcpy(sh->shadow_next + off, src, len);
        CHECK_OK(rpma_write(conn, dst, off, src_mr, 0, len, RPMA_F_COMPLETION_ON_ERROR, (void *)3));
        long long t = it_now_ms();
        CHECK_OK(rpma_flush(conn, dst, off, len, RPMA_FLUSH_TYPE_PERSISTENT,
                            RPMA_F_COMPLETION_ALWAYS, (void *)4));
        it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)4);
        sh->flush_ms += it_now_ms() - t;
        if (g_kpf >= 0) {
            long p = first_dirty(off, len);
            if (p >= 0)
                IT_FAIL(
                    "cycle %d round %d: page %ld of the flushed range [%zu, %zu) is still "
                    "dirty after the PERSISTENT flush completed",
                    cycle, round, p, off, off + len);
            sh->clean_checks++;
        }
    }
    /* right after the last completion */
    CHECK(kill(target_pid, SIGKILL) == 0);
    enum rpma_conn_event ev = it_next_event(conn);
    if (ev != RPMA_CONN_CLOSED) /* its kernel disconnects a dead process's connections */
        IT_FAIL("event %s after the target died, expected CLOSED", rpma_utils_conn_event_2str(ev));
    (void)rpma_conn_disconnect(conn); /* the peer is gone: the result does not matter */
    CHECK_OK(rpma_conn_delete(&conn));
    CHECK_OK(rpma_mr_remote_delete(&dst));
    CHECK_OK(rpma_mr_dereg(&src_mr));
    CHECK_OK(rpma_mr_dereg(&back_mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(src);
    free(back);
    exit(0);
}

int main(int argc, char *argv[]) {
    alarm(IT_ALARM_S);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 3) {
        fprintf(stderr, "usage: %s PORT DIR\n", argv[0]);
        return 2;
    }
    g_page = sysconf(_SC_PAGESIZE);
    char path[4096];
    snprintf(path, sizeof(path), "%s/persist_rounds.XXXXXX", argv[2]);
    int fd = mkstemp(path);
    if (fd < 0) IT_FAIL("mkstemp(%s) failed", path);
    CHECK(ftruncate(fd, FILE_SIZE) == 0);
    CHECK(unlink(path) == 0); /* nothing is left behind whatever happens */
    g_view = mmap(NULL, FILE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if (g_view == MAP_FAILED) IT_FAIL("mmap of the view failed");
    struct shared *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) IT_FAIL("mmap of the shared state failed");
    memset(sh, 0, sizeof(*sh));
    /* static: the forked children exit without freeing what the parent allocated */
    static uint8_t buf[FILE_SIZE];

    /* this process never uses the library: it only forks, waits and reads the file */
    for (int cycle = 0; cycle < CYCLES; cycle++) {
        int ready[2];
        CHECK(pipe(ready) == 0);
        int tpid = it_fork();
        if (tpid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan outlives a failed test */
            close(ready[0]);
            target(fd, argv[1], ready[1]);
            exit(1);
        }
        close(ready[1]);
        char r;
        CHECK(read(ready[0], &r, 1) == 1);
        close(ready[0]);
        int cpid = it_fork();
        if (cpid == 0) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (cpid == 0) client(cycle, argv[1], tpid, sh);
        int status = 0;
        CHECK(waitpid(cpid, &status, 0) == cpid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            kill(tpid, SIGKILL);
            IT_FAIL("cycle %d: the client failed", cycle);
        }
        it_wait_killed(tpid);
        memcpy(sh->shadow, sh->shadow_next, FILE_SIZE);
        /* the file itself, not a mapping, must hold the bytes */
        CHECK_EQ(pread(fd, buf, FILE_SIZE, 0), FILE_SIZE);
        for (size_t i = 0; i < FILE_SIZE; i++)
            if (buf[i] != sh->shadow[i])
                IT_FAIL("cycle %d: the file differs at offset %zu", cycle, i);
    }
    printf(
        "%d cycles x %d rounds: file verified after every kill; %d flushed ranges checked "
        "clean in the page cache%s; mean PERSISTENT flush %.2f ms\n",
        CYCLES, ROUNDS, sh->clean_checks, sh->probe ? "" : " (page flags not readable)",
        (double)sh->flush_ms / (CYCLES * ROUNDS));
    return 0;
}
