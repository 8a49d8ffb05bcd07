/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mr_reg.c -- rpma_mr_reg validates the memory as ibv_reg_mr does: an unmapped range, PROT_NONE
 * memory, a range with a hole, or read-only memory for a usage that ibv_reg_mr registers with
 * LOCAL_WRITE or REMOTE_WRITE in upstream librpma (READ_DST, WRITE_SRC, WRITE_DST, RECV) give
 * RPMA_E_PROVIDER, register nothing (the peer stays deletable) and say why in the log. Read-only
 * memory registers for READ_SRC, SEND and the flush usages. Write-only memory (PROT_WRITE alone)
 * registers for the usages that may be written into, as ibv_reg_mr pins it for writing (whether
 * it registers for reading alone depends on the kernel, so that is not checked); adjacent
 * mappings with the needed protection count as one range.
 *
 * One process: mr_reg ADDR (no listener, no port).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

static size_t page;
static char last_log[512];
static int errors_logged;

static void capture(enum rpma_log_level level, const char *file, const int line, const char *func,
                    const char *fmt, ...) {
    (void)file;
    (void)line;
    (void)func;
    if (level > RPMA_LOG_LEVEL_ERROR) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_log, sizeof(last_log), fmt, ap);
    va_end(ap);
    errors_logged++;
}

static char *map(size_t pages, int prot) {
    void *p = mmap(NULL, pages * page, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) IT_FAIL("mmap: %s", strerror(errno));
    return p;
}

/* registering [ptr, +size) with usage must fail with RPMA_E_PROVIDER, log why, keep *mr_ptr */
static void expect_refused(struct rpma_peer *peer, void *ptr, size_t size, int usage,
                           const char *why, const char *what) {
    struct rpma_mr_local *mr = (struct rpma_mr_local *)0x1;
    int logged = errors_logged;
    last_log[0] = '\0';
    int ret = rpma_mr_reg(peer, ptr, size, usage, &mr);
    if (ret != RPMA_E_PROVIDER) {
        if (ret == 0) rpma_mr_dereg(&mr);
        IT_FAIL("%s: rpma_mr_reg(usage 0x%x) returned %d (%s), expected RPMA_E_PROVIDER", what,
                usage, ret, rpma_err_2str(ret));
    }
    CHECK(mr == (struct rpma_mr_local *)0x1);
    /* the reason in the log is rpma's own wording; the reference logs only the failed call */
    if (errors_logged == logged || (!it_reference() && !strstr(last_log, why)))
        IT_FAIL("%s: no error log saying \"%s\" (last: \"%s\")", what, why, last_log);
    printf("refused %-40s usage 0x%03x: %s\n", what, usage, last_log);
}

static void expect_ok(struct rpma_peer *peer, void *ptr, size_t size, int usage, const char *what) {
    struct rpma_mr_local *mr = NULL;
    int ret = rpma_mr_reg(peer, ptr, size, usage, &mr);
    if (ret != 0)
        IT_FAIL("%s: rpma_mr_reg(usage 0x%x) returned %d (%s), expected 0", what, usage, ret,
                rpma_err_2str(ret));
    CHECK(mr != NULL);
    CHECK_OK(rpma_mr_dereg(&mr));
    printf("accepted %-40s usage 0x%03x\n", what, usage);
}

int main(int argc, char *argv[]) {
    alarm(20);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: %s ADDR\n", argv[0]);
        return 2;
    }
    page = (size_t)sysconf(_SC_PAGESIZE);
    CHECK_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_ERROR));
    CHECK_OK(rpma_log_set_function(capture));
    struct rpma_peer *peer = it_peer_new(argv[1], true);

    const int writing[] = {RPMA_MR_USAGE_READ_DST, RPMA_MR_USAGE_WRITE_SRC, RPMA_MR_USAGE_WRITE_DST,
                           RPMA_MR_USAGE_RECV, RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST};
    const int reading[] = {
        RPMA_MR_USAGE_READ_SRC, RPMA_MR_USAGE_SEND, RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
        RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
            RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT};
    const int all = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC |
                    RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV |
                    RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;

    /* unmapped: mapped, then given back */
    char *gone = map(4, PROT_READ | PROT_WRITE);
    CHECK(munmap(gone, 4 * page) == 0);
    expect_refused(peer, gone, 4 * page, RPMA_MR_USAGE_READ_SRC, "not mapped", "unmapped range");
    expect_refused(peer, gone + 1, 10, all, "not mapped", "unmapped bytes");

    /* PROT_NONE */
    char *none = map(2, PROT_NONE);
    /* Linux before 6.2 pinned memory only read by the NIC with FOLL_FORCE, which takes PROT_NONE
     * pages too (the reference's guest kernel is 6.1); later kernels and rpma refuse it */
    if (!it_reference())
        expect_refused(peer, none, 2 * page, RPMA_MR_USAGE_READ_SRC, "not readable", "PROT_NONE");
    expect_refused(peer, none, 2 * page, all, "not readable", "PROT_NONE");

    /* a hole in the middle: each side alone is fine */
    char *holed = map(3, PROT_READ | PROT_WRITE);
    CHECK(munmap(holed + page, page) == 0);
    expect_refused(peer, holed, 3 * page, RPMA_MR_USAGE_READ_SRC, "not mapped",
                   "range with a hole");
    expect_refused(peer, holed + page - 8, 16, all, "not mapped", "range into a hole");
    expect_ok(peer, holed, page, all, "the part before the hole");
    expect_ok(peer, holed + 2 * page, page, all, "the part after the hole");

    /* one byte past the end of a mapping (its next page just given back) */
    char *tail = map(2, PROT_READ | PROT_WRITE);
    CHECK(munmap(tail + page, page) == 0);
    expect_refused(peer, tail, page + 1, RPMA_MR_USAGE_READ_SRC, "not mapped",
                   "one byte past the end");

    /* read-only memory */
    char *ro = map(2, PROT_READ);
    for (size_t k = 0; k < sizeof(writing) / sizeof(writing[0]); k++)
        expect_refused(peer, ro, 2 * page, writing[k], "not writable", "read-only, written into");
    for (size_t k = 0; k < sizeof(reading) / sizeof(reading[0]); k++)
        expect_ok(peer, ro, 2 * page, reading[k], "read-only, only read");

    /* write-only memory */
    char *wo = map(2, PROT_WRITE);
    for (size_t k = 0; k < sizeof(writing) / sizeof(writing[0]); k++)
        expect_ok(peer, wo, 2 * page, writing[k], "write-only, written into");
    expect_ok(peer, wo, 2 * page, all, "write-only, every usage");

    /* adjacent mappings merge: rw | rw (a separate mapping) | ro */
    char *adj = map(3, PROT_READ | PROT_WRITE);
    CHECK(mmap(adj + page, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1,
               0) == adj + page);
    CHECK(mprotect(adj + 2 * page, page, PROT_READ) == 0);
    expect_ok(peer, adj, 2 * page, all, "two adjacent writable mappings");
    expect_ok(peer, adj, 3 * page, RPMA_MR_USAGE_READ_SRC, "writable then read-only");
    expect_refused(peer, adj + page, 2 * page, RPMA_MR_USAGE_WRITE_DST, "not writable",
                   "writable then read-only");

    /* ordinary heap memory */
    char *heap = malloc(100000);
    CHECK(heap != NULL);
    expect_ok(peer, heap + 1, 99999, all, "heap");
    free(heap);

    /* a refused registration left nothing behind: the peer is unused */
    CHECK_OK(rpma_peer_delete(&peer));
    munmap(none, 2 * page);
    munmap(holed, page);
    munmap(holed + 2 * page, page);
    munmap(tail, page);
    munmap(ro, 2 * page);
    munmap(wo, 2 * page);
    munmap(adj, 3 * page);
    CHECK_OK(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION));
    printf("mr_reg: all checks passed\n");
    return 0;
}
