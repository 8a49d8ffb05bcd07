/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * delay_answers.c -- an LD_PRELOAD shim that holds back the tcp provider's answer frames.
 *
 * The provider sends every frame with sendmsg: a side's requests on one TCP stream (from the
 * application's thread), its answers to the peer's requests on the other (ACK, op 16, and read
 * response, op 17, sent by the engine thread). On a real network the two streams are independent,
 * so a request posted in reaction to a receive can reach the peer before the answer that
 * acknowledged the message reacted to. On loopback that almost never happens; this shim makes it
 * happen: when RPMA_TEST_DELAY_ANSWERS_US is set to N > 0, a sendmsg whose data begins with an
 * answer frame (the first byte of the first non-empty iovec is 16 or 17) sleeps N microseconds
 * before it is forwarded. Everything else passes straight through.
 *
 * The first byte of a frame is its opcode in protocol 1 (32-byte header) and 2 (40-byte header)
 * alike. A sendmsg that resumes a partly sent frame may begin with another byte; at worst such a
 * call is delayed too, which changes no data.
 *
 * rpma_test_delayed_answers() tells a test how many sendmsg calls were delayed, so it can check
 * the shim was in effect.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#define OP_ACK 16
#define OP_READ_RESP 17

typedef ssize_t (*sendmsg_fn)(int, const struct msghdr *, int);

static _Atomic(sendmsg_fn) real_sendmsg;
static atomic_ulong delayed;
static long delay_us = -1; /* -1: not read yet */

__attribute__((visibility("default"))) unsigned long rpma_test_delayed_answers(void) {
    return atomic_load(&delayed);
}

static long delay_setting(void) {
    long d = __atomic_load_n(&delay_us, __ATOMIC_RELAXED);
    if (d >= 0) return d;
    const char *s = getenv("RPMA_TEST_DELAY_ANSWERS_US");
    d = 0;
    if (s && *s) {
        char *end = NULL;
        long v = strtol(s, &end, 10);
        if (end && *end == '\0' && v > 0 && v <= 10 * 1000 * 1000) d = v;
    }
    __atomic_store_n(&delay_us, d, __ATOMIC_RELAXED);
    return d;
}

static int begins_with_answer(const struct msghdr *msg) {
    if (!msg || !msg->msg_iov) return 0;
    for (size_t i = 0; i < msg->msg_iovlen; i++) {
        if (msg->msg_iov[i].iov_len == 0) continue;
        unsigned char op = *(const unsigned char *)msg->msg_iov[i].iov_base;
        return op == OP_ACK || op == OP_READ_RESP;
    }
    return 0;
}

__attribute__((visibility("default"))) ssize_t sendmsg(int fd, const struct msghdr *msg,
                                                       int flags) {
    sendmsg_fn real = atomic_load(&real_sendmsg);
    if (!real) {
        real = (sendmsg_fn)dlsym(RTLD_NEXT, "sendmsg");
        if (!real) {
            errno = ENOSYS;
            return -1;
        }
        atomic_store(&real_sendmsg, real);
    }
    long d = delay_setting();
    if (d > 0 && begins_with_answer(msg)) {
        int saved = errno;
        struct timespec ts = {.tv_sec = d / 1000000, .tv_nsec = (d % 1000000) * 1000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        errno = saved;
        atomic_fetch_add(&delayed, 1);
    }
    return real(fd, msg, flags);
}
