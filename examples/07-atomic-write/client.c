/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 07-atomic-write/client.c -- appends words to the server's log: each word is written after the
 * used part (rpma_write), then the used-length counter at offset 0 is updated with one 8-byte
 * atomic write (rpma_atomic_write). Operations on a connection execute in order, so the counter
 * never covers an entry that is not there yet.
 *
 * usage: client ADDR PORT [WORD...]
 */
#include <string.h>

#include "common.h"

#define HEADER 8 /* the used-length counter */
#define LOCAL_SIZE 4096

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT [WORD...]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    const char *defaults[] = {"alpha", "beta", "gamma"};
    const char **words = argc > 3 ? (const char **)argv + 3 : defaults;
    int nwords = argc > 3 ? argc - 3 : 3;

    struct rpma_peer *peer = ex_peer_new(addr, false);
    /* [0, 8): where the counter is read to; after it, the words to write */
    char *local = ex_malloc(LOCAL_SIZE);
    struct rpma_mr_local *mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, local, LOCAL_SIZE, RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC,
                         &mr));
    struct rpma_conn *conn = ex_connect(peer, addr, port, NULL, NULL, 0);
    struct rpma_mr_remote *log_mr = ex_remote_mr_from_pdata(conn, 0);
    size_t log_size = 0;
    EX_CHECK(rpma_mr_remote_get_size(log_mr, &log_size));
    struct rpma_cq *cq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));

    /* where the log ends now */
    EX_CHECK(rpma_read(conn, mr, 0, log_mr, 0, HEADER, RPMA_F_COMPLETION_ALWAYS, NULL));
    ex_cq_expect(cq, IBV_WC_RDMA_READ, NULL, NULL);
    uint64_t used;
    memcpy(&used, local, sizeof(used));
    printf("the log uses %llu bytes\n", (unsigned long long)used);

    size_t src_off = HEADER;
    for (int w = 0; w < nwords; w++) {
        /* entries are separated by a space */
        size_t wlen = strlen(words[w]);
        bool last = w + 1 == nwords;
        size_t len = wlen + (last ? 0 : 1);
        if (src_off + len > LOCAL_SIZE || HEADER + used + len > log_size)
            EX_FAIL("the log is full");
        memcpy(local + src_off, words[w], wlen);
        if (!last) local[src_off + wlen] = ' ';
        EX_CHECK(rpma_write(conn, log_mr, HEADER + used, mr, src_off, len,
                            RPMA_F_COMPLETION_ON_ERROR, NULL));
        used += len;
        src_off += len;

        /* publish the new length: one 8-byte store at an 8-byte aligned offset */
        char counter[8];
        memcpy(counter, &used, sizeof(counter));
        EX_CHECK(rpma_atomic_write(conn, log_mr, 0, counter, RPMA_F_COMPLETION_ALWAYS, NULL));
        ex_cq_expect(cq, IBV_WC_RDMA_WRITE, NULL, NULL);
        printf("appended \"%s\"; the log uses %llu bytes\n", words[w], (unsigned long long)used);
    }

    /* make sure everything is placed before the connection ends */
    EX_CHECK(rpma_flush(conn, log_mr, 0, HEADER + used, RPMA_FLUSH_TYPE_VISIBILITY,
                        RPMA_F_COMPLETION_ALWAYS, NULL));
    ex_cq_expect(cq, IBV_WC_RDMA_READ, NULL, NULL);

    EX_CHECK(rpma_mr_remote_delete(&log_mr));
    ex_disconnect(&conn);
    EX_CHECK(rpma_mr_dereg(&mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(local);
    return 0;
}
