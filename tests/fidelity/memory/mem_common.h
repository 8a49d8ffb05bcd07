/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mem_common.h -- helpers for the memory-ownership fidelity tests.
 *
 * Each test is one program that plays both roles of a scenario over 127.0.0.1: the second role
 * runs in a forked child, and the two talk over a control socket (SOCK_SEQPACKET, one message
 * per call), so that one role can tell the other when to act and report what it found (per-chunk
 * results, timestamps on the shared CLOCK_MONOTONIC). The child dies with its parent. Every wait
 * is bounded; any failed check ends the process with status 1 (common.h's IT_FAIL).
 */
#ifndef RPMA_FID_MEM_COMMON_H
#define RPMA_FID_MEM_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

#define MT_ADDR it_test_addr()
/* a backstop for every process; the ctest TIMEOUT is longer, the tests far shorter */
#define MT_ALARM_S (50 * it_time_scale())
#define MT_MSG 512 /* the longest control message */

/* command line "PROG PORT [VARIANT]": sets the alarm, line-buffered stdout, warnings to stderr */
void mt_init(int argc, char *argv[], const char **port, const char **variant);

/*
 * Forks. The child runs fn(ctl, arg) and exits 0 when it returns (1 from any failed check); the
 * parent gets the child's pid and its own end of the control socket in *ctl. Call before the
 * library starts threads (as it_fork).
 */
int mt_spawn(void (*fn)(int ctl, void *arg), void *arg, int *ctl);
/* waits up to timeout_ms for the child, which must exit 0 */
void mt_reap(int pid, int timeout_ms);
/* waits up to timeout_ms for the child; returns its wait status (-1 on timeout: killed then) */
int mt_reap_status(int pid, int timeout_ms);

/* one control message (printf format) */
void mt_say(int ctl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* the next control message, NUL-terminated in buf (MT_MSG bytes); fails on EOF or timeout */
void mt_hear(int ctl, char *buf, int timeout_ms);
/* the next message must start with word and a space (or be word); returns what follows it */
const char *mt_expect(int ctl, const char *word, char *buf, int timeout_ms);

/* stops / resumes a process (the child) and waits until it is stopped */
void mt_stop(int pid);
void mt_cont(int pid);

/* anonymous private memory, page-aligned, zeroed */
void *mt_map(size_t len);
void mt_unmap(void *p, size_t len);

/* pattern helpers over common.c's it_fill(seed): the position counts from buf */
bool mt_is_pattern(const void *buf, size_t len, uint64_t seed);
/* how many bytes equal it_fill(seed)'s byte at their position */
size_t mt_count_bytes(const void *buf, size_t len, uint64_t seed);
/*
 * How many aligned 8-byte words equal it_fill(seed)'s word at their position while differing
 * from it_fill(other)'s (a word of another pattern cannot match by chance: 2^-64).
 */
size_t mt_count_words(const void *buf, size_t len, uint64_t seed, uint64_t other);
/* the first offset at which a and b differ, or -1 */
long mt_first_diff(const void *a, const void *b, size_t len);
/* every byte equals c */
bool mt_all_bytes(const void *buf, size_t len, uint8_t c);

/* one completion within timeout_ms or fail; its arrival time (CLOCK_MONOTONIC ms) in *at */
void mt_cq_get(struct rpma_cq *cq, struct ibv_wc *wc, int timeout_ms, long long *at);
/* the connection's next event within timeout_ms or fail */
enum rpma_conn_event mt_next_event(struct rpma_conn *conn, int timeout_ms);
/*
 * Ends a connection whatever state it is in: disconnect, wait up to timeout_ms for CLOSED or
 * LOST (the event is returned), delete.
 */
enum rpma_conn_event mt_close(struct rpma_conn **conn, int timeout_ms);

/* a connection config with these queue sizes (cq and sq; the rq as well) */
struct rpma_conn_cfg *mt_cfg(uint32_t queue);

/* a short name for a status */
const char *mt_st(enum ibv_wc_status st);

/*
 * The completions of one round in posting order, checked as verbs orders them after an error:
 * SUCCESS only before the first error, at most one `expected` error (the one the scenario
 * causes), everything else WR_FLUSH_ERR. Every violation is printed as a FAIL line.
 */
#define MT_TALLY_MAX 128
struct mt_tally {
    enum ibv_wc_status expected, alt; /* alt: a status counted as `expected` (mt_tally_local) */
    int ok, errs, flushed, other;     /* errs: completions with the expected error */
    int first_err;                    /* index of the first error, -1 while none */
    enum ibv_wc_status first_st;      /* its status */
    int failures;
    char line[MT_TALLY_MAX + 1]; /* a letter per completion: S, `letter`, f or ? */
    char letter;
};
void mt_tally_init(struct mt_tally *t, enum ibv_wc_status expected, char letter);
/*
 * A local protection failure (dead or foreign lkey, missing LOCAL_WRITE): the IB spec and
 * hardware NICs report IBV_WC_LOC_PROT_ERR, rxe reports IBV_WC_LOC_QP_OP_ERR where its lkey
 * lookup fails on the send or receive path. Both count as the expected error.
 */
void mt_tally_local(struct mt_tally *t, char letter);
bool mt_is_local_prot(enum ibv_wc_status st);
/* completion k, named `what` in FAIL lines ("round 2: read 5"); true if it is a SUCCESS */
bool mt_tally_add(struct mt_tally *t, int k, enum ibv_wc_status st, const char *what);
/* the name of the expected error as it came (expected or alt) */
const char *mt_tally_err(const struct mt_tally *t);
/* ends the round (`round` names it in FAIL lines); returns the failures of the round */
int mt_tally_end(struct mt_tally *t, const char *round);

/* the memory a process holds: VmRSS and VmHWM (peak) of /proc/PID/status in KiB, -1 if gone */
long mt_rss_kib(int pid);
long mt_hwm_kib(int pid);

#endif /* RPMA_FID_MEM_COMMON_H */
