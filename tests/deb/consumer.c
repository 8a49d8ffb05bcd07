/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * consumer.c -- a program built against the packaged librpma-dev and run on the packaged
 * librpma0 (tests/deb/deb_test.sh). It forks: the child listens on 127.0.0.1 (a port in
 * 25800-25899) and exposes a 4 KiB region; the parent connects, writes a pattern, flushes it
 * (VISIBILITY) and disconnects; the child then checks that the pattern arrived. Last, it prints
 * the file librpma.so.0 was loaded from, as /proc/self/maps names it: "librpma: PATH".
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <librpma.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define ADDR "127.0.0.1"
#define PORT_FIRST 25800
#define PORT_LAST 25899
#define SIZE 4096

static const char *who = "client";

#define TRY(call)                                                                         \
	do {                                                                                  \
		int ret_ = (call);                                                                \
		if (ret_) {                                                                       \
			fprintf(stderr, "consumer [%s]: %s: %s\n", who, #call, rpma_err_2str(ret_)); \
			return 1;                                                                     \
		}                                                                                 \
	} while (0)

static void pattern(unsigned char *p)
{
	for (size_t i = 0; i < SIZE; i++)
		p[i] = (unsigned char)(i * 7u + 3u);
}

static int next_event(struct rpma_conn *conn, enum rpma_conn_event want)
{
	enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
	TRY(rpma_conn_next_event(conn, &ev));
	if (ev != want) {
		fprintf(stderr, "consumer [%s]: expected %s, got %s\n", who,
			rpma_utils_conn_event_2str(want), rpma_utils_conn_event_2str(ev));
		return 1;
	}
	return 0;
}

static int serve(int port_fd)
{
	struct ibv_context *ctx = NULL;
	struct rpma_peer *peer = NULL;
	struct rpma_ep *ep = NULL;
	struct rpma_mr_local *mr = NULL;
	struct rpma_conn_req *req = NULL;
	struct rpma_conn *conn = NULL;
	char port[16];
	int ret = RPMA_E_PROVIDER, p;

	who = "server";
	TRY(rpma_utils_get_ibv_context(ADDR, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx));
	TRY(rpma_peer_new(ctx, &peer));
	/* a port taken by someone else is a provider error: try the next one */
	for (p = PORT_FIRST; p <= PORT_LAST && ret == RPMA_E_PROVIDER; p++) {
		snprintf(port, sizeof(port), "%d", p);
		ret = rpma_ep_listen(peer, ADDR, port, &ep);
	}
	TRY(ret);
	p--;
	if (write(port_fd, &p, sizeof(p)) != (ssize_t)sizeof(p))
		return 1;
	close(port_fd);

	unsigned char *buf = calloc(1, SIZE);
	if (!buf)
		return 1;
	TRY(rpma_mr_reg(peer, buf, SIZE, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
			&mr));
	unsigned char desc[64];
	size_t desc_size = 0;
	TRY(rpma_mr_get_descriptor_size(mr, &desc_size));
	if (desc_size > sizeof(desc))
		return 1;
	TRY(rpma_mr_get_descriptor(mr, desc));
	struct rpma_conn_private_data pdata = {desc, (uint8_t)desc_size};

	TRY(rpma_ep_next_conn_req(ep, NULL, &req));
	TRY(rpma_conn_req_connect(&req, &pdata, &conn));
	if (next_event(conn, RPMA_CONN_ESTABLISHED) || next_event(conn, RPMA_CONN_CLOSED))
		return 1;
	unsigned char want[SIZE];
	pattern(want);
	if (memcmp(buf, want, SIZE) != 0) {
		fprintf(stderr, "consumer [server]: the written pattern is not in the region\n");
		return 1;
	}
	TRY(rpma_conn_disconnect(conn));
	TRY(rpma_conn_delete(&conn));
	TRY(rpma_mr_dereg(&mr));
	TRY(rpma_ep_shutdown(&ep));
	TRY(rpma_peer_delete(&peer));
	free(buf);
	return 0;
}

static int client(int port)
{
	struct ibv_context *ctx = NULL;
	struct rpma_peer *peer = NULL;
	struct rpma_conn_req *req = NULL;
	struct rpma_conn *conn = NULL;
	struct rpma_mr_local *src_mr = NULL;
	struct rpma_mr_remote *dst = NULL;
	struct rpma_cq *cq = NULL;
	struct rpma_conn_private_data pdata = {0};
	struct ibv_wc wc;
	char port_str[16];
	static int flush_ctx;

	snprintf(port_str, sizeof(port_str), "%d", port);
	TRY(rpma_utils_get_ibv_context(ADDR, RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx));
	TRY(rpma_peer_new(ctx, &peer));
	unsigned char *src = calloc(1, SIZE);
	if (!src)
		return 1;
	pattern(src);
	TRY(rpma_mr_reg(peer, src, SIZE, RPMA_MR_USAGE_WRITE_SRC, &src_mr));
	TRY(rpma_conn_req_new(peer, ADDR, port_str, NULL, &req));
	TRY(rpma_conn_req_connect(&req, NULL, &conn));
	if (next_event(conn, RPMA_CONN_ESTABLISHED))
		return 1;
	TRY(rpma_conn_get_private_data(conn, &pdata));
	TRY(rpma_mr_remote_from_descriptor(pdata.ptr, pdata.len, &dst));

	TRY(rpma_write(conn, dst, 0, src_mr, 0, SIZE, RPMA_F_COMPLETION_ON_ERROR, NULL));
	TRY(rpma_flush(conn, dst, 0, SIZE, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS,
		       &flush_ctx));
	TRY(rpma_conn_get_cq(conn, &cq));
	int ret;
	while ((ret = rpma_cq_get_wc(cq, 1, &wc, NULL)) == RPMA_E_NO_COMPLETION) {
		ret = rpma_cq_wait(cq);
		if (ret && ret != RPMA_E_NO_COMPLETION)
			break;
	}
	TRY(ret);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)(uintptr_t)&flush_ctx) {
		fprintf(stderr, "consumer [client]: flush completed with status %d\n", (int)wc.status);
		return 1;
	}

	TRY(rpma_conn_disconnect(conn));
	if (next_event(conn, RPMA_CONN_CLOSED))
		return 1;
	TRY(rpma_conn_delete(&conn));
	TRY(rpma_mr_remote_delete(&dst));
	TRY(rpma_mr_dereg(&src_mr));
	TRY(rpma_peer_delete(&peer));
	free(src);
	printf("consumer: wrote and flushed %d bytes over %s:%d\n", SIZE, ADDR, port);
	return 0;
}

/* prints the file behind the mapping of rpma_peer_new's code */
static int print_library(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	int found = 0;
	if (!f)
		return 1;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		unsigned long fn = (unsigned long)(uintptr_t)&rpma_peer_new;
		char *path = strchr(line, '/');
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && fn >= lo && fn < hi && path) {
			path[strcspn(path, "\n")] = '\0';
			printf("librpma: %s\n", path);
			found = 1;
		}
	}
	fclose(f);
	return !found;
}

int main(void)
{
	int fds[2];
	if (pipe(fds))
		return 1;
	fflush(NULL);
	pid_t parent = getpid(), pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(fds[0]);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		alarm(30);
		_exit(serve(fds[1]) ? 1 : 0);
	}
	close(fds[1]);
	alarm(30);
	int port = 0, ret = 1, status = 0;
	ssize_t got;
	do {
		got = read(fds[0], &port, sizeof(port));
	} while (got < 0 && errno == EINTR);
	if (got == (ssize_t)sizeof(port) && port > 0)
		ret = client(port);
	else
		fprintf(stderr, "consumer: the server did not start listening\n");
	if (ret)
		kill(pid, SIGTERM);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "consumer: the server failed (status 0x%x)\n", status);
		ret = 1;
	}
	if (print_library())
		ret = 1;
	return ret;
}
