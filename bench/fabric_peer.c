/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fabric_peer.c -- libfabric's tcp provider (FI_EP_MSG) over loopback, the same pattern as
 * rpma-perf: a target exposes a region (FI_REMOTE_READ | FI_REMOTE_WRITE) and a thread that reads
 * its CQ (which drives the provider's progress); the initiator keeps iodepth fi_write / fi_read
 * operations in flight.
 *
 *   fabric_peer write|read --size N --iodepth D [--time S] [--port P] [--spin]
 *   fabric_peer lat [--size 8] [--time S] [--spin]   fi_writemsg(FI_DELIVERY_COMPLETE), depth 1:
 *                                                    the closest match to rpma write + flush
 * --spin polls fi_cq_read; otherwise the initiator blocks in fi_cq_sread. Prints one JSON object;
 * server_cpu_s is the forked target's whole CPU time (wait4), set-up included.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"

#define FIVER FI_VERSION(1, 9)
#define EQ_WAIT_MS 15000

enum test { T_WRITE, T_READ, T_LAT };

struct opts {
    enum test test;
    size_t size;
    int iodepth;
    double time_s;
    char port[16];
    bool spin;
};

/* what the target tells the initiator in the accept data */
struct region_info {
    uint64_t addr;
    uint64_t key;
    uint64_t len;
};

static const char *role = "initiator";

#define CHK(call)                                                                               \
    do {                                                                                        \
        int ret_ = (int)(call);                                                                 \
        if (ret_) {                                                                             \
            fprintf(stderr, "fabric_peer [%s]: %s: %s (%d)\n", role, #call, fi_strerror(-ret_), \
                    ret_);                                                                      \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static struct fi_info *get_info(const char *port, bool source) {
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    hints->ep_attr->type = FI_EP_MSG;
    hints->caps = FI_MSG | FI_RMA;
    hints->mode = FI_CONTEXT;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->fabric_attr->prov_name = strdup("tcp");
    hints->addr_format = FI_SOCKADDR_IN;
    CHK(fi_getinfo(FIVER, "127.0.0.1", port, source ? FI_SOURCE : 0, hints, &info));
    fi_freeinfo(hints);
    return info;
}

static void *alloc_buf(size_t len) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, len)) exit(1);
    memset(p, 0x3c, len);
    return p;
}

/* one event of the expected kind from the EQ; the cm entry (with data) lands in buf */
static void eq_expect(struct fid_eq *eq, uint32_t want, void *buf, size_t len) {
    uint32_t event = 0;
    ssize_t n = fi_eq_sread(eq, &event, buf, len, EQ_WAIT_MS, 0);
    if (n < 0) {
        struct fi_eq_err_entry err = {0};
        if (n == -FI_EAVAIL) fi_eq_readerr(eq, &err, 0);
        fprintf(stderr, "fabric_peer [%s]: fi_eq_sread: %s %s\n", role, fi_strerror((int)-n),
                n == -FI_EAVAIL ? fi_strerror(err.err) : "");
        exit(1);
    }
    if (event != want) {
        fprintf(stderr, "fabric_peer [%s]: EQ event %u, expected %u\n", role, event, want);
        exit(1);
    }
}

static void mr_enable(struct fi_info *info, struct fid_mr *mr, struct fid_ep *ep) {
    if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
        CHK(fi_mr_bind(mr, &ep->fid, 0));
        CHK(fi_mr_enable(mr));
    }
}

static void cq_fail(struct fid_cq *cq) {
    struct fi_cq_err_entry err = {0};
    fi_cq_readerr(cq, &err, 0);
    fprintf(stderr, "fabric_peer [%s]: completion error: %s (prov %d)\n", role,
            fi_strerror(err.err), err.prov_errno);
    exit(1);
}

/* ---- target ---- */

static void target(const struct opts *o, int ready_fd) {
    role = "target";
    struct fi_info *info = get_info(o->port, true);
    struct fid_fabric *fabric;
    struct fid_eq *eq;
    struct fid_pep *pep;
    struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
    CHK(fi_fabric(info->fabric_attr, &fabric, NULL));
    CHK(fi_eq_open(fabric, &eq_attr, &eq, NULL));
    CHK(fi_passive_ep(fabric, info, &pep, NULL));
    CHK(fi_pep_bind(pep, &eq->fid, 0));
    CHK(fi_listen(pep));
    char ok = 1;
    if (write(ready_fd, &ok, 1) != 1) exit(1);
    close(ready_fd);

    char ebuf[sizeof(struct fi_eq_cm_entry) + 256];
    eq_expect(eq, FI_CONNREQ, ebuf, sizeof(ebuf));
    struct fi_info *ci = ((struct fi_eq_cm_entry *)ebuf)->info;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_ep *ep;
    struct fi_cq_attr cq_attr = {
        .format = FI_CQ_FORMAT_CONTEXT, .size = 64, .wait_obj = FI_WAIT_UNSPEC};
    CHK(fi_domain(fabric, ci, &domain, NULL));
    CHK(fi_cq_open(domain, &cq_attr, &cq, NULL));
    CHK(fi_endpoint(domain, ci, &ep, NULL));
    CHK(fi_ep_bind(ep, &eq->fid, 0));
    CHK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    CHK(fi_enable(ep));

    size_t len = o->size * (size_t)o->iodepth;
    char *region = alloc_buf(len), *rbuf = alloc_buf(64);
    struct fid_mr *mr, *rmr;
    CHK(fi_mr_reg(domain, region, len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, 0, &mr, NULL));
    CHK(fi_mr_reg(domain, rbuf, 64, FI_RECV, 0, 2, 0, &rmr, NULL));
    mr_enable(ci, mr, ep);
    mr_enable(ci, rmr, ep);
    struct fi_context rctx;
    CHK(fi_recv(ep, rbuf, 64, fi_mr_desc(rmr), 0, &rctx));
    struct region_info ri = {
        .addr = (ci->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)region : 0,
        .key = fi_mr_key(mr),
        .len = len};
    CHK(fi_accept(ep, &ri, sizeof(ri)));
    eq_expect(eq, FI_CONNECTED, ebuf, sizeof(ebuf));

    /* the target's thread: read the CQ (driving progress) until the initiator says done */
    for (;;) {
        struct fi_cq_entry e;
        ssize_t n = fi_cq_sread(cq, &e, 1, NULL, 100);
        if (n == -FI_EAGAIN) continue;
        if (n == -FI_EAVAIL) cq_fail(cq);
        if (n < 0) {
            fprintf(stderr, "fabric_peer [target]: fi_cq_sread: %s\n", fi_strerror((int)-n));
            exit(1);
        }
        if (e.op_context == &rctx) break;
    }
    uint32_t event;
    /* the initiator shuts down next; wait for it briefly, then close */
    fi_eq_sread(eq, &event, ebuf, sizeof(ebuf), 2000, 0);
    fi_close(&ep->fid);
    fi_close(&mr->fid);
    fi_close(&rmr->fid);
    fi_close(&cq->fid);
    fi_close(&domain->fid);
    fi_close(&pep->fid);
    fi_close(&eq->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(ci);
    fi_freeinfo(info);
    free(region);
    free(rbuf);
}

/* ---- initiator ---- */

struct ini {
    const struct opts *o;
    struct fid_ep *ep;
    struct fid_cq *cq;
    void *desc;
    char *buf;
    struct region_info ri;
    struct fi_context *ctx;
};

static int wait_cq(struct ini *c, struct fi_cq_entry *e, int max) {
    for (;;) {
        ssize_t n = c->o->spin ? fi_cq_read(c->cq, e, (size_t)max)
                               : fi_cq_sread(c->cq, e, (size_t)max, NULL, 1000);
        if (n > 0) return (int)n;
        if (n == -FI_EAGAIN) continue;
        if (n == -FI_EAVAIL) cq_fail(c->cq);
        fprintf(stderr, "fabric_peer: fi_cq_read: %s\n", fi_strerror((int)-n));
        exit(1);
    }
}

static ssize_t post(struct ini *c, int slot) {
    size_t off = (size_t)slot * c->o->size;
    void *ctx = &c->ctx[slot];
    char *lb = c->buf + off;
    uint64_t ra = c->ri.addr + off;
    switch (c->o->test) {
        case T_WRITE:
            return fi_write(c->ep, lb, c->o->size, c->desc, 0, ra, c->ri.key, ctx);
        case T_READ:
            return fi_read(c->ep, lb, c->o->size, c->desc, 0, ra, c->ri.key, ctx);
        default: {
            struct iovec iov = {.iov_base = lb, .iov_len = c->o->size};
            struct fi_rma_iov rma = {.addr = ra, .len = c->o->size, .key = c->ri.key};
            struct fi_msg_rma msg = {.msg_iov = &iov,
                                     .desc = &c->desc,
                                     .iov_count = 1,
                                     .rma_iov = &rma,
                                     .rma_iov_count = 1,
                                     .context = ctx};
            return fi_writemsg(c->ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
        }
    }
}

static int initiator(const struct opts *o, pid_t child) {
    struct fi_info *info = get_info(o->port, false);
    struct fid_fabric *fabric;
    struct fid_eq *eq;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_ep *ep;
    struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT,
                                 .size = (size_t)o->iodepth + 16,
                                 .wait_obj = o->spin ? FI_WAIT_NONE : FI_WAIT_UNSPEC};
    CHK(fi_fabric(info->fabric_attr, &fabric, NULL));
    CHK(fi_eq_open(fabric, &eq_attr, &eq, NULL));
    CHK(fi_domain(fabric, info, &domain, NULL));
    CHK(fi_cq_open(domain, &cq_attr, &cq, NULL));
    CHK(fi_endpoint(domain, info, &ep, NULL));
    CHK(fi_ep_bind(ep, &eq->fid, 0));
    CHK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    CHK(fi_enable(ep));
    CHK(fi_connect(ep, info->dest_addr, NULL, 0));
    char ebuf[sizeof(struct fi_eq_cm_entry) + 256];
    eq_expect(eq, FI_CONNECTED, ebuf, sizeof(ebuf));
    struct ini c = {.o = o, .ep = ep, .cq = cq};
    memcpy(&c.ri, ((struct fi_eq_cm_entry *)ebuf)->data, sizeof(c.ri));

    size_t len = o->size * (size_t)o->iodepth;
    c.buf = alloc_buf(len);
    struct fid_mr *mr;
    CHK(fi_mr_reg(domain, c.buf, len, FI_READ | FI_WRITE | FI_SEND, 0, 3, 0, &mr, NULL));
    mr_enable(info, mr, ep);
    c.desc = fi_mr_desc(mr);
    c.ctx = calloc((size_t)o->iodepth, sizeof(*c.ctx));
    int *free_slots = calloc((size_t)o->iodepth, sizeof(int));
    uint64_t *t_post = calloc((size_t)o->iodepth, sizeof(uint64_t));
    int nfree = o->iodepth;
    for (int i = 0; i < o->iodepth; i++) free_slots[i] = i;

    struct bench_lat lat;
    bench_lat_init(&lat);
    struct fi_cq_entry e[64];
    uint64_t ops = 0, cpu0 = bench_cpu_ns(), t0 = bench_now_ns(), now = t0;
    uint64_t deadline = t0 + (uint64_t)(o->time_s * 1e9);
    int inflight = 0;
    while (now < deadline || inflight) {
        while (now < deadline && nfree) {
            int s = free_slots[--nfree];
            t_post[s] = bench_now_ns();
            ssize_t r;
            while ((r = post(&c, s)) == -FI_EAGAIN) {
                /* the provider's queue is full: make progress and retry */
                fi_cq_read(cq, NULL, 0);
            }
            if (r) {
                fprintf(stderr, "fabric_peer: posting: %s\n", fi_strerror((int)-r));
                exit(1);
            }
            inflight++;
        }
        int n = wait_cq(&c, e, 64);
        now = bench_now_ns();
        for (int i = 0; i < n; i++) {
            int s = (int)((struct fi_context *)e[i].op_context - c.ctx);
            if (s < 0 || s >= o->iodepth) {
                fprintf(stderr, "fabric_peer: unexpected completion\n");
                exit(1);
            }
            bench_lat_add(&lat, now - t_post[s]);
            free_slots[nfree++] = s;
        }
        inflight -= n;
        ops += (uint64_t)n;
    }
    uint64_t t1 = now, cpu1 = bench_cpu_ns();

    /* tell the target to stop: one 8-byte send */
    struct fi_context sctx;
    CHK(fi_send(ep, c.buf, 8, c.desc, 0, &sctx));
    for (;;) {
        int n = wait_cq(&c, e, 1);
        if (n == 1 && e[0].op_context == &sctx) break;
    }
    fi_shutdown(ep, 0);
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    wait4(child, &st, 0, &ru);
    double scpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                  (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    double secs = (double)(t1 - t0) / 1e9;
    static const char *const names[] = {"write", "read", "lat"};
    printf(
        "{\"peer\":\"libfabric-tcp\",\"test\":\"%s\",\"size\":%zu,\"iodepth\":%d,"
        "\"spin\":%s,\"ops\":%llu,\"seconds\":%.6f,\"bw_bytes_per_s\":%.1f,\"rate\":%.1f,",
        names[o->test], o->size, o->iodepth, o->spin ? "true" : "false", (unsigned long long)ops,
        secs, (double)ops * (double)o->size / secs, (double)ops / secs);
    bench_lat_json(stdout, &lat);
    printf(",\"client_cpu_s\":%.4f,\"server_cpu_s\":%.4f}\n", (double)(cpu1 - cpu0) / 1e9, scpu);
    bench_lat_free(&lat);
    fi_close(&ep->fid);
    fi_close(&mr->fid);
    fi_close(&cq->fid);
    fi_close(&domain->fid);
    fi_close(&eq->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

int main(int argc, char *argv[]) {
    struct opts o = {.size = 8, .iodepth = 1, .time_s = 3};
    snprintf(o.port, sizeof(o.port), "47800");
    if (argc < 2) goto usage;
    if (!strcmp(argv[1], "write"))
        o.test = T_WRITE;
    else if (!strcmp(argv[1], "read"))
        o.test = T_READ;
    else if (!strcmp(argv[1], "lat"))
        o.test = T_LAT;
    else
        goto usage;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--spin"))
            o.spin = true;
        else if (i + 1 < argc && !strcmp(argv[i], "--size"))
            o.size = bench_parse_size(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--iodepth"))
            o.iodepth = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--time"))
            o.time_s = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--port"))
            snprintf(o.port, sizeof(o.port), "%s", argv[++i]);
        else
            goto usage;
    }
    if (o.test == T_LAT) o.iodepth = 1;
    if (o.size == 0 || o.iodepth < 1 || o.iodepth > 1024 || o.time_s <= 0) goto usage;
    alarm((unsigned)o.time_s + 60);
    int fds[2];
    if (pipe(fds)) return 1;
    fflush(stdout);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        close(fds[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        target(&o, fds[1]);
        _exit(0);
    }
    close(fds[1]);
    char ok = 0;
    struct pollfd p = {.fd = fds[0], .events = POLLIN};
    if (poll(&p, 1, EQ_WAIT_MS) <= 0 || read(fds[0], &ok, 1) != 1) {
        fprintf(stderr, "fabric_peer: the target did not start\n");
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 1;
    }
    close(fds[0]);
    return initiator(&o, pid);
usage:
    fprintf(stderr,
            "usage: fabric_peer write|read|lat [--size N] [--iodepth D] [--time S] [--port P] "
            "[--spin]\n");
    return 2;
}
