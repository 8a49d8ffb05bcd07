/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fork.c -- a forked child cannot use or delete its parent's endpoints, requests, connections or
 * peers: each such call returns RPMA_E_PROVIDER at once (the old library waited forever for an
 * engine thread that does not exist in the child; on RDMA the kernel refuses the inherited
 * objects with EACCES) and leaves the object alone, so the parent's connection keeps working.
 * The handle is cleared where the man page says so for any failure (rpma_conn_req_connect,
 * rpma_conn_req_delete, rpma_conn_delete) and kept otherwise.
 *
 * rdma-core's fork rules: a child may not use what its parent created, and a child of a process
 * that had already opened the RDMA devices cannot use RDMA at all (librdmacm keeps the parent's
 * device contexts, which the kernel refuses to the child). rpma allows more (docs/tcp-provider.md,
 * "Fork"): a child's own peers work whenever it forked, it may register memory on an inherited
 * peer, and its calls on the parent's objects are refused harmlessly. Those parts run on rpma
 * only. On the reference (it_reference) the child calls only what fails before it touches
 * anything (rpma_ep_next_conn_req, rpma_ep_shutdown: EACCES), since its failed connect or
 * delete there destroys the parent's QP and CQs and its disconnect moves the parent's QP to the
 * error state; and two_children forks before the parent first uses the library, as RDMA
 * requires.
 *
 * Two cases, named by the last argument:
 * - server_child: the server takes the client's first request and forks; the child tries
 *   rpma_conn_req_connect, rpma_conn_req_delete, rpma_ep_next_conn_req, rpma_ep_shutdown,
 *   rpma_ep_listen, rpma_srq_recv and rpma_peer_delete on what it inherited. Then the parent
 * accepts the request and the client does a write + read round trip.
 * - client_child: the client connects and forks; the child tries rpma_conn_delete (within 1 s),
 *   rpma_conn_disconnect, rpma_conn_req_new, rpma_peer_delete, rpma_write and rpma_recv on the
 *   parent's connection (a frame from the child would corrupt the parent's stream), registers
 * memory on the inherited peer, then connects with a peer of its own and does a round trip. Then
 * the parent does a round trip on its connection and disconnects (CLOSED).
 * - two_children: the client connects, then forks two children that connect at the same moment
 *   (released together by a pipe), each with a peer of its own, and do a round trip each. A
 *   pre-forking server's workers do this; their connections must not be taken for one.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define REGION 8192
#define SLICE 4096 /* the parent's slice at 0, the child's at SLICE */
#define LEN 1024
#define FAST_MS (1000 * it_time_scale()) /* a refused call in the child returns within this */

/* a refused call: RPMA_E_PROVIDER within FAST_MS */
#define CHECK_REFUSED(call)                                                                \
    do {                                                                                   \
        long long t0_ = it_now_ms();                                                       \
        CHECK_ERR(call, RPMA_E_PROVIDER);                                                  \
        long long dt_ = it_now_ms() - t0_;                                                 \
        if (dt_ > FAST_MS) IT_FAIL("%s took %lld ms in the child", #call, dt_);            \
        printf("child %d: %s -> RPMA_E_PROVIDER in %lld ms\n", (int)getpid(), #call, dt_); \
    } while (0)

/* waits up to 15 s (scaled) for the child, which must exit 0 */
static void wait_child(pid_t pid) {
    long long deadline = it_now_ms() + 15000LL * it_time_scale();
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) break;
        CHECK(r == 0);
        if (it_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            IT_FAIL("the forked child did not finish within 15 s");
        }
        usleep(10000);
    }
    if (WIFSIGNALED(st))
        IT_FAIL("the forked child died of signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) IT_FAIL("the forked child failed");
}

/* a child that hangs is ended by this, which its parent reports */
static pid_t fork_child(void) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) alarm(5 * (unsigned)it_time_scale());
    return pid;
}

static bool server_child, client_child, two_children;

static void server(const struct it_args *a) {
    struct rpma_peer *peer = it_peer_new(a->addr, true);
    char *buf = it_alloc(REGION);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, buf, REGION, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC, &mr));
    char desc[IT_MR_DESC_SIZE];
    CHECK_OK(rpma_mr_get_descriptor(mr, desc));
    struct rpma_srq *srq = NULL;
    CHECK_OK(rpma_srq_new(peer, NULL, &srq));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a->addr, a->port, &ep));
    it_ready();

    struct rpma_conn_req *req = it_next_req(ep, NULL);
    pid_t pid = server_child ? fork_child() : -1;
    if (pid == 0) {
        /* Calls that consume an object on failure come last, each on a copy of the handle.
         * On the reference only the calls that fail before they touch anything: its failed
         * connect or delete destroys the parent's QP and CQs (their destroy commands pass the
         * kernel's check), as rdma-core's rule, never use the parent's objects, warns. */
        struct rpma_conn_req *other = NULL;
        CHECK_REFUSED(rpma_ep_next_conn_req(ep, NULL, &other));
        struct rpma_ep *kept_ep = ep;
        CHECK_REFUSED(rpma_ep_shutdown(&ep));
        /* kept, as its man page says; upstream frees the endpoint anyway */
        CHECK(ep == kept_ep || (it_reference() && ep == NULL));
        if (!it_reference()) { /* on RDMA a new cm_id of the child's may listen */
            struct rpma_ep *ep2 = NULL;
            CHECK_REFUSED(rpma_ep_listen(peer, a->addr, "0", &ep2));
        }
        if (it_reference()) exit(0);
        /* a post would serve a parent's connection waiting on the SRQ, on this thread */
        CHECK_REFUSED(rpma_srq_recv(srq, mr, 0, 8, NULL));
        struct rpma_conn_req *r = req;
        struct rpma_conn *c = NULL;
        CHECK_REFUSED(rpma_conn_req_connect(&r, NULL, &c));
        CHECK(r == NULL && c == NULL); /* consumed, as on any failure */
        r = req;
        CHECK_REFUSED(rpma_conn_req_delete(&r));
        CHECK(r == NULL);
        struct rpma_peer *kept_peer = peer;
        CHECK_REFUSED(rpma_peer_delete(&peer));
        CHECK(peer == kept_peer);
        exit(0);
    }
    if (pid > 0) wait_child(pid);

    struct rpma_conn *conn = it_accept(&req, desc, sizeof(desc)); /* the client */
    if (client_child && !it_nic()) {
        struct rpma_conn_req *req2 = it_next_req(ep, NULL); /* its child */
        struct rpma_conn *conn2 = it_accept(&req2, desc, sizeof(desc));
        it_disconnect_passive(&conn2, false);
    }
    if (two_children) {
        struct rpma_conn *kids[2];
        for (int i = 0; i < 2; i++) {
            struct rpma_conn_req *r = it_next_req(ep, NULL);
            kids[i] = it_accept(&r, desc, sizeof(desc));
        }
        for (int i = 0; i < 2; i++) it_disconnect_passive(&kids[i], false);
    }
    it_disconnect_passive(&conn, false);
    CHECK_OK(rpma_ep_shutdown(&ep));
    CHECK_OK(rpma_srq_delete(&srq));
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
}

/* writes a pattern to the server's slice at off, reads it back and compares */
static void round_trip(struct rpma_conn *conn, struct rpma_mr_local *mr, char *buf, size_t off,
                       uint64_t seed) {
    struct rpma_mr_remote *rmr = it_remote_mr(conn, 0);
    struct rpma_cq *cq = NULL;
    CHECK_OK(rpma_conn_get_cq(conn, &cq));
    it_fill(buf, LEN, seed);
    memset(buf + LEN, 0, LEN);
    CHECK_OK(rpma_write(conn, rmr, off, mr, 0, LEN, RPMA_F_COMPLETION_ALWAYS, (void *)1));
    it_cq_expect(cq, IBV_WC_RDMA_WRITE, (void *)1);
    CHECK_OK(rpma_read(conn, mr, LEN, rmr, off, LEN, RPMA_F_COMPLETION_ALWAYS, (void *)2));
    it_cq_expect(cq, IBV_WC_RDMA_READ, (void *)2);
    long bad = it_verify(buf + LEN, LEN, seed);
    if (bad >= 0) IT_FAIL("read back differs at byte %ld", bad);
    CHECK_OK(rpma_mr_remote_delete(&rmr));
}

static void in_child(const struct it_args *a, struct rpma_peer *peer, struct rpma_conn *conn) {
    /* On the reference nothing: librdmacm's disconnect moves the QP to the error state before
     * the kernel refuses the rest, and a failed delete destroys the QP and CQs, so either
     * breaks the parent's connection; RDMA gives this child nothing more either */
    if (it_reference()) exit(0);
    CHECK_REFUSED(rpma_conn_disconnect(conn));
    struct rpma_conn_req *req = NULL;
    CHECK_REFUSED(rpma_conn_req_new(peer, a->addr, a->port, NULL, &req));
    struct rpma_conn *c0 = conn;
    CHECK_REFUSED(rpma_conn_delete(&c0));
    CHECK(c0 == NULL); /* as on any failure; the parent's connection is untouched */
    struct rpma_peer *p0 = peer;
    CHECK_REFUSED(rpma_peer_delete(&p0));
    CHECK(p0 == peer);
    if (it_nic()) { /* rdma-core's rule: the parent's protection domain is not the child's */
        char *mine = it_alloc(LEN);
        struct rpma_mr_local *mr = NULL;
        CHECK_REFUSED(rpma_mr_reg(peer, mine, LEN, RPMA_MR_USAGE_WRITE_SRC, &mr));
        free(mine);
        exit(0);
    }

    /* memory registration needs no engine: it works on the inherited peer */
    char *mine = it_alloc(2 * LEN);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(rpma_mr_reg(peer, mine, 2 * LEN, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_RECV, &mr));
    /* posts on the parent's connection would write into the parent's streams: refused */
    struct rpma_mr_remote *rmr = it_remote_mr(conn, 0);
    CHECK_REFUSED(rpma_write(conn, rmr, SLICE, mr, 0, LEN, RPMA_F_COMPLETION_ALWAYS, NULL));
    CHECK_REFUSED(rpma_recv(conn, mr, LEN, LEN, NULL));
    CHECK_OK(rpma_mr_remote_delete(&rmr));
    CHECK_OK(rpma_mr_dereg(&mr));

    /* a peer and a connection of its own */
    struct rpma_peer *own = it_peer_new(a->addr, false);
    CHECK_OK(
        rpma_mr_reg(own, mine, 2 * LEN, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &mr));
    struct rpma_conn *c = it_connect(own, a->addr, a->port, NULL, NULL, 0);
    round_trip(c, mr, mine, SLICE, 0xc41d);
    it_disconnect_active(&c);
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&own));
    free(mine);
    printf("child %d: its own connection did a verified write + read\n", (int)getpid());
    exit(0);
}

/* makes a peer of its own, waits for the pipe's end, then connects and does a round trip at off */
static void racing_child(const struct it_args *a, int ready, int go, size_t off, uint64_t seed) {
    struct rpma_peer *own = it_peer_new(a->addr, false);
    char *mine = it_alloc(2 * LEN);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(
        rpma_mr_reg(own, mine, 2 * LEN, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &mr));
    char c = 'r';
    CHECK(write(ready, &c, 1) == 1);
    CHECK(read(go, &c, 1) == 0);
    struct rpma_conn *c2 = it_connect(own, a->addr, a->port, NULL, NULL, 0);
    round_trip(c2, mr, mine, off, seed);
    it_disconnect_active(&c2);
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&own));
    free(mine);
    printf("child %d: connected beside its sibling and did a verified write + read\n",
           (int)getpid());
    exit(0);
}

/* two_children: the racing children and the pipes that release them */
static pid_t kids[2];
static int ready_rd = -1, go_wr = -1;

static void fork_racers(const struct it_args *a) {
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0);
    for (int i = 0; i < 2; i++) {
        kids[i] = fork_child();
        if (kids[i] == 0) {
            close(go[1]);
            racing_child(a, ready[1], go[0], SLICE + (size_t)i * LEN, 0x5157 + (uint64_t)i);
        }
    }
    close(go[0]);
    ready_rd = ready[0];
    go_wr = go[1];
}

static void release_racers(void) {
    for (int i = 0; i < 2; i++) {
        char c;
        if (read(ready_rd, &c, 1) != 1) IT_FAIL("a child did not get ready");
    }
    close(go_wr); /* releases both at once */
    for (int i = 0; i < 2; i++) wait_child(kids[i]);
}

static void client(const struct it_args *a) {
    /* RDMA: a child can use it only if forked before the parent opened the devices */
    bool early = two_children && it_nic();
    if (early) fork_racers(a);
    struct rpma_peer *peer = it_peer_new(a->addr, false);
    char *buf = it_alloc(2 * LEN);
    struct rpma_mr_local *mr = NULL;
    CHECK_OK(
        rpma_mr_reg(peer, buf, 2 * LEN, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &mr));
    struct rpma_conn *conn = it_connect(peer, a->addr, a->port, NULL, NULL, 0);

    if (client_child) {
        pid_t pid = fork_child();
        if (pid == 0) in_child(a, peer, conn);
        wait_child(pid);
    }
    if (two_children) {
        if (!early) fork_racers(a);
        release_racers();
    }

    round_trip(conn, mr, buf, 0, 0xfa7e);
    printf("parent: its connection still did a verified write + read\n");
    it_disconnect_active(&conn);
    CHECK_OK(rpma_mr_dereg(&mr));
    CHECK_OK(rpma_peer_delete(&peer));
    free(buf);
}

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    alarm(20);
    if (a.argc != 1) IT_FAIL("the last argument is server_child, client_child or two_children");
    server_child = strcmp(a.argv[0], "server_child") == 0;
    client_child = strcmp(a.argv[0], "client_child") == 0;
    two_children = strcmp(a.argv[0], "two_children") == 0;
    CHECK(server_child || client_child || two_children);
    if (a.server)
        server(&a);
    else
        client(&a);
    printf("fork %s: passed\n", a.server ? "server" : "client");
    return 0;
}
