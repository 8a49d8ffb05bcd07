/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 13-srq-three-clients/client.c -- starts CLIENTS client processes; each connects on its own,
 * says who it is in the private data and sends MESSAGES messages to the server's shared receive
 * queue
 *
 * usage: client ADDR PORT [CLIENTS [MESSAGES]]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define MAX_CLIENTS 8
#define MSG 32

struct hello {
    uint8_t id;
    uint8_t messages;
};

static void run_client(const char *addr, const char *port, int id, int messages) {
    struct rpma_peer *peer = ex_peer_new(addr, false);
    char *msg = ex_malloc(MSG);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, msg, MSG, RPMA_MR_USAGE_SEND, &mr));
    struct hello hello = {.id = (uint8_t)id, .messages = (uint8_t)messages};
    struct rpma_conn *conn = ex_connect(peer, addr, port, NULL, &hello, sizeof(hello));
    uint32_t qp_num = 0;
    EX_CHECK(rpma_conn_get_qp_num(conn, &qp_num));
    printf("client %d: connected (local qp %u)\n", id, qp_num);
    struct rpma_cq *cq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));

    for (int m = 0; m < messages; m++) {
        snprintf(msg, MSG, "client %d, message %d", id, m);
        EX_CHECK(rpma_send(conn, mr, 0, MSG, RPMA_F_COMPLETION_ALWAYS, NULL));
        ex_cq_expect(cq, IBV_WC_SEND, NULL, NULL);
    }
    printf("client %d: sent %d messages\n", id, messages);

    ex_disconnect(&conn);
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(msg);
}

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT [CLIENTS [MESSAGES]]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    int clients = argc > 3 ? atoi(argv[3]) : 3;
    int messages = argc > 4 ? atoi(argv[4]) : 4;
    if (clients < 1 || clients > MAX_CLIENTS) EX_FAIL("CLIENTS must be within 1..%d", MAX_CLIENTS);
    if (messages < 1 || messages > 100) EX_FAIL("MESSAGES must be within 1..100");

    /* separate processes, forked before the library is used */
    pid_t pids[MAX_CLIENTS];
    for (int c = 0; c < clients; c++) {
        fflush(stdout);
        pids[c] = fork();
        if (pids[c] < 0) EX_FAIL("fork: %s", strerror(errno));
        if (pids[c] == 0) {
            ex_start(); /* a child does not inherit the alarm */
            run_client(addr, port, c, messages);
            exit(0);
        }
    }
    int failed = 0;
    for (int c = 0; c < clients; c++) {
        int status = 0;
        while (waitpid(pids[c], &status, 0) < 0)
            if (errno != EINTR) EX_FAIL("waitpid: %s", strerror(errno));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "client %d failed\n", c);
            failed++;
        }
    }
    return failed ? 1 : 0;
}
