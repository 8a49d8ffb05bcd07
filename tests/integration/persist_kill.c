/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * persist_kill.c -- a PERSISTENT flush into a file-backed MAP_SHARED region, then the server
 * process is SIGKILLed: the bytes must be in the file.
 *
 * The server role forks: the child maps the file and serves; the parent only waits for the child
 * to be killed and then reads the file back with pread. The child's pid travels to the client in
 * the accept private data; the client kills it as soon as the flush has completed.
 * Extra argument: a directory for the temporary file.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

#define FILE_SIZE (256 * 1024)
#define OFF (12 * 1024)
#define LEN (64 * 1024 + 100)
#define SEED 0xd0ab1e
#define OFF_PCFG IT_MR_DESC_SIZE
#define OFF_PID (IT_MR_DESC_SIZE + IT_PCFG_DESC_SIZE)
#define PDATA_LEN (OFF_PID + 4)

static void serve(const struct it_args *a, int fd) {
    void *map = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) IT_FAIL("mmap failed");
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(
        peer, map, FILE_SIZE,
        RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT,
        &mr));
    struct rpma_peer_cfg *pcfg = NULL;
    CHECK_OK(rpma_peer_cfg_new(&pcfg));
    CHECK_OK(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true));
    char pdata[PDATA_LEN];
    CHECK_OK(rpma_mr_get_descriptor(mr, pdata));
    CHECK_OK(rpma_peer_cfg_get_descriptor(pcfg, pdata + OFF_PCFG));
    int32_t pid = (int32_t)getpid();
    memcpy(pdata + OFF_PID, &pid, sizeof(pid));

    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();
    struct rpma_conn_req *req = it_next_req(ep, NULL);
    struct rpma_conn *conn = it_accept(&req, pdata, sizeof(pdata));
    (void)conn;
    /* the client kills this process after its flush; nothing here may end it first */
    it_wait_for_death(40);
}

static void server(const struct it_args *a) {
    if (a->argc < 1) IT_FAIL("directory argument missing");
    char path[4096];
    snprintf(path, sizeof(path), "%s/persist_kill.XXXXXX", a->argv[0]);
    int fd = mkstemp(path);
    if (fd < 0) IT_FAIL("mkstemp(%s) failed", path);
    CHECK(ftruncate(fd, FILE_SIZE) == 0);
    /* the descriptor keeps the file alive: nothing is left behind whatever happens */
    CHECK(unlink(path) == 0);

    int pid = it_fork();
    if (pid == 0) {
        serve(a, fd);
        exit(1);
    }
    it_wait_killed(pid);

    /* the file, not any mapping, must hold the bytes: read it back with pread */
    char *buf = it_alloc(FILE_SIZE);
    CHECK_EQ(pread(fd, buf, FILE_SIZE, 0), FILE_SIZE);
    close(fd);
    long bad = it_verify(buf + OFF, LEN, SEED);
    if (bad >= 0) IT_FAIL("file differs from the written data at offset %ld", OFF + bad);
    for (size_t i = 0; i < FILE_SIZE; i++)
        if ((i < OFF || i >= OFF + LEN) && buf[i] != 0)
            IT_FAIL("byte %zu outside the written range changed", i);
    free(buf);
}

static void client(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *src = it_alloc(LEN);
    it_fill(src, LEN, SEED);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, src, LEN, RPMA_MR_USAGE_WRITE_SRC, &mr));
    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);
    struct rpma_mr_remote *dst = it_remote_mr(conn, 0);
    it_apply_remote_pcfg(conn, OFF_PCFG);
    struct rpma_conn_private_data pd = {0};
    CHECK_OK(rpma_conn_get_private_data(conn, &pd));
    CHECK(pd.len >= PDATA_LEN);
    int32_t pid = 0;
    memcpy(&pid, (char *)pd.ptr + OFF_PID, sizeof(pid));
    CHECK(pid > 1);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));

    /* two writes, then one PERSISTENT flush covering both */
    CHECK_OK(rpma_write(conn, dst, OFF, mr, 0, LEN / 2, RPMA_F_COMPLETION_ON_ERROR, (void *)1));
    CHECK_OK(rpma_write(conn, dst, OFF + LEN / 2, mr, LEN / 2, LEN - LEN / 2,
                        RPMA_F_COMPLETION_ON_ERROR, (void *)2));
    CHECK_OK(rpma_flush(conn, dst, OFF, LEN, RPMA_FLUSH_TYPE_PERSISTENT, RPMA_F_COMPLETION_ALWAYS,
                        (void *)3));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)3);

    CHECK(kill((pid_t)pid, SIGKILL) == 0);
    enum rpma_conn_event ev = it_next_event(conn);
    if (ev != RPMA_CONN_CLOSED) /* its kernel disconnects a dead process's connections */
        IT_FAIL("event %s after the server died, expected CLOSED", rpma_utils_conn_event_2str(ev));
    (void)rpma_conn_disconnect(conn); /* the peer is gone: the result does not matter */
    CHECK_OK(rpma_conn_delete(&conn));
    CHECK_OK(rpma_mr_remote_delete(&dst));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(src);
}

int main(int argc, char *argv[]) {
    return it_main(argc, argv, server, client);
}
