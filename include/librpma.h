/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * librpma.h -- the rpma public C API (librpma 1.3 compatible).
 *
 * rpma implements the librpma 1.3 interface: same declarations, same constant values and the
 * same ABI (librpma.so.0, symbols versioned LIBRPMA_1.0). Each call is specified by its man page,
 * e.g. rpma_flush(3); the comments here only summarise. See docs/overview.md for what rpma adds
 * (the tcp provider) and its limits.
 */
#ifndef LIBRPMA_H
#define LIBRPMA_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* flag for rpma_conn_wait(3): block until a completion arrives */
#define RPMA_W_WAIT_FOR_COMPLETION (1)

/* error codes returned by every call; rpma_err_2str(3) describes them */
#define RPMA_E_UNKNOWN (-100000)	 /* cause unknown */
#define RPMA_E_NOSUPP (-100001)		 /* not supported */
#define RPMA_E_PROVIDER (-100002)	 /* the transport provider failed */
#define RPMA_E_NOMEM (-100003)		 /* out of memory */
#define RPMA_E_INVAL (-100004)		 /* invalid argument */
#define RPMA_E_NO_COMPLETION (-100005)	 /* no completion ready */
#define RPMA_E_NO_EVENT (-100006)	 /* no event ready */
#define RPMA_E_AGAIN (-100007)		 /* temporary failure, try again */
#define RPMA_E_SHARED_CHANNEL (-100008)	 /* the CQ's completion channel is shared */
#define RPMA_E_NOT_SHARED_CHNL (-100009) /* the connection has no shared channel */

/* ---- devices: rpma_utils_get_ibv_context(3) ---- */

#define RPMA_DEFAULT_TIMEOUT_MS 1000

enum rpma_util_ibv_context_type {
	RPMA_UTIL_IBV_CONTEXT_LOCAL,  /* the device owning a local address */
	RPMA_UTIL_IBV_CONTEXT_REMOTE  /* the device that routes to a remote address */
};

/* rpma_utils_get_ibv_context(3): the device context for an address; the library owns it */
int rpma_utils_get_ibv_context(const char *addr, enum rpma_util_ibv_context_type type,
	struct ibv_context **ibv_ctx_ptr);

/* rpma_utils_ibv_context_is_odp_capable(3) */
int rpma_utils_ibv_context_is_odp_capable(struct ibv_context *ibv_ctx, int *is_odp_capable);

/* ---- peer configuration: rpma_peer_cfg_new(3) ---- */

struct rpma_peer_cfg;

int rpma_peer_cfg_new(struct rpma_peer_cfg **pcfg_ptr);
int rpma_peer_cfg_delete(struct rpma_peer_cfg **pcfg_ptr);
/* rpma_peer_cfg_set_direct_write_to_pmem(3): the peer can flush writes to persistence */
int rpma_peer_cfg_set_direct_write_to_pmem(struct rpma_peer_cfg *pcfg, bool supported);
int rpma_peer_cfg_get_direct_write_to_pmem(const struct rpma_peer_cfg *pcfg, bool *supported);
/* rpma_peer_cfg_get_descriptor(3): serialise for the remote side (1 byte) */
int rpma_peer_cfg_get_descriptor(const struct rpma_peer_cfg *pcfg, void *desc);
int rpma_peer_cfg_get_descriptor_size(const struct rpma_peer_cfg *pcfg, size_t *desc_size);
/* rpma_peer_cfg_from_descriptor(3) */
int rpma_peer_cfg_from_descriptor(const void *desc, size_t desc_size,
	struct rpma_peer_cfg **pcfg_ptr);

/* ---- peer: rpma_peer_new(3) ---- */

struct rpma_peer;

int rpma_peer_new(struct ibv_context *ibv_ctx, struct rpma_peer **peer_ptr);
/* rpma_peer_delete(3): fails while registrations or connections use the peer */
int rpma_peer_delete(struct rpma_peer **peer_ptr);

/* ---- memory registration: rpma_mr_reg(3) ---- */

struct rpma_mr_local;
struct rpma_mr_remote;

#define RPMA_MR_USAGE_READ_SRC (1 << 0)		   /* remote side may read it */
#define RPMA_MR_USAGE_READ_DST (1 << 1)		   /* local destination of reads */
#define RPMA_MR_USAGE_WRITE_SRC (1 << 2)	   /* local source of writes */
#define RPMA_MR_USAGE_WRITE_DST (1 << 3)	   /* remote side may write it */
#define RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY (1 << 4) /* flushable for visibility */
#define RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT (1 << 5) /* flushable to persistence */
#define RPMA_MR_USAGE_SEND (1 << 6)		   /* source of sends */
#define RPMA_MR_USAGE_RECV (1 << 7)		   /* destination of receives */

int rpma_mr_reg(struct rpma_peer *peer, void *ptr, size_t size, int usage,
	struct rpma_mr_local **mr_ptr);
int rpma_mr_dereg(struct rpma_mr_local **mr_ptr);
/* rpma_mr_get_descriptor(3): 21 bytes for the remote side */
int rpma_mr_get_descriptor(const struct rpma_mr_local *mr, void *desc);
int rpma_mr_remote_from_descriptor(const void *desc, size_t desc_size,
	struct rpma_mr_remote **mr_ptr);
int rpma_mr_get_descriptor_size(const struct rpma_mr_local *mr, size_t *desc_size);
int rpma_mr_get_ptr(const struct rpma_mr_local *mr, void **ptr);
int rpma_mr_get_size(const struct rpma_mr_local *mr, size_t *size);
int rpma_mr_remote_get_size(const struct rpma_mr_remote *mr, size_t *size);
/* rpma_mr_remote_get_flush_type(3): the RPMA_MR_USAGE_FLUSH_TYPE_* bits of the region */
int rpma_mr_remote_get_flush_type(const struct rpma_mr_remote *mr, int *flush_type);
int rpma_mr_remote_delete(struct rpma_mr_remote **mr_ptr);
/* rpma_mr_advise(3): advice values and flags as for ibv_advise_mr(3) */
int rpma_mr_advise(struct rpma_mr_local *mr, size_t offset, size_t len, int advice,
	uint32_t flags);

/* ---- connection configuration: rpma_conn_cfg_new(3) ---- */

struct rpma_conn_cfg;

int rpma_conn_cfg_new(struct rpma_conn_cfg **cfg_ptr);
int rpma_conn_cfg_delete(struct rpma_conn_cfg **cfg_ptr);
int rpma_conn_cfg_set_timeout(struct rpma_conn_cfg *cfg, int timeout_ms);
int rpma_conn_cfg_get_timeout(const struct rpma_conn_cfg *cfg, int *timeout_ms);
int rpma_conn_cfg_set_cq_size(struct rpma_conn_cfg *cfg, uint32_t cq_size);
/* rpma_conn_cfg_set_compl_channel(3): one channel for the CQ and the RCQ */
int rpma_conn_cfg_get_compl_channel(const struct rpma_conn_cfg *cfg, bool *shared);
int rpma_conn_cfg_set_compl_channel(struct rpma_conn_cfg *cfg, bool shared);
int rpma_conn_cfg_get_cq_size(const struct rpma_conn_cfg *cfg, uint32_t *cq_size);
/* rpma_conn_cfg_set_rcq_size(3): 0 means no separate receive CQ */
int rpma_conn_cfg_set_rcq_size(struct rpma_conn_cfg *cfg, uint32_t rcq_size);
int rpma_conn_cfg_get_rcq_size(const struct rpma_conn_cfg *cfg, uint32_t *rcq_size);
int rpma_conn_cfg_set_sq_size(struct rpma_conn_cfg *cfg, uint32_t sq_size);
int rpma_conn_cfg_get_sq_size(const struct rpma_conn_cfg *cfg, uint32_t *sq_size);
int rpma_conn_cfg_set_rq_size(struct rpma_conn_cfg *cfg, uint32_t rq_size);
int rpma_conn_cfg_get_rq_size(const struct rpma_conn_cfg *cfg, uint32_t *rq_size);

struct rpma_srq;

int rpma_conn_cfg_set_srq(struct rpma_conn_cfg *cfg, struct rpma_srq *srq);
int rpma_conn_cfg_get_srq(const struct rpma_conn_cfg *cfg, struct rpma_srq **srq_ptr);

/* ---- connection: rpma_conn_next_event(3) and friends ---- */

struct rpma_conn;

int rpma_conn_get_event_fd(const struct rpma_conn *conn, int *fd);

enum rpma_conn_event {
	RPMA_CONN_UNDEFINED = -1, /* no event */
	RPMA_CONN_ESTABLISHED,	  /* the connection is up */
	RPMA_CONN_CLOSED,	  /* orderly disconnect by either side */
	RPMA_CONN_LOST,		  /* the connection broke */
	RPMA_CONN_REJECTED,	  /* the remote side refused */
	RPMA_CONN_UNREACHABLE	  /* the remote side could not be reached */
};

int rpma_conn_next_event(struct rpma_conn *conn, enum rpma_conn_event *event);
const char *rpma_utils_conn_event_2str(enum rpma_conn_event conn_event);

/* private data exchanged at connection set-up: up to 56 B on connect, 196 B on accept */
struct rpma_conn_private_data {
	void *ptr;
	uint8_t len;
};

int rpma_conn_get_private_data(const struct rpma_conn *conn,
	struct rpma_conn_private_data *pdata);
/* rpma_conn_apply_remote_peer_cfg(3): enables PERSISTENT flushes if the remote allows them */
int rpma_conn_apply_remote_peer_cfg(struct rpma_conn *conn, const struct rpma_peer_cfg *pcfg);
int rpma_conn_get_qp_num(const struct rpma_conn *conn, uint32_t *qp_num);

struct rpma_cq;

int rpma_conn_get_cq(const struct rpma_conn *conn, struct rpma_cq **cq_ptr);
/* rpma_conn_get_rcq(3): NULL unless an RCQ was configured */
int rpma_conn_get_rcq(const struct rpma_conn *conn, struct rpma_cq **rcq_ptr);
int rpma_conn_disconnect(struct rpma_conn *conn);
int rpma_conn_delete(struct rpma_conn **conn_ptr);

/* ---- connection request: rpma_conn_req_new(3) ---- */

struct rpma_conn_req;

int rpma_conn_req_new(struct rpma_peer *peer, const char *addr, const char *port,
	const struct rpma_conn_cfg *cfg, struct rpma_conn_req **req_ptr);
/* rpma_conn_req_delete(3): on an incoming request this rejects it */
int rpma_conn_req_delete(struct rpma_conn_req **req_ptr);
/* rpma_conn_req_connect(3): connects or accepts; consumes *req_ptr even on failure */
int rpma_conn_req_connect(struct rpma_conn_req **req_ptr,
	const struct rpma_conn_private_data *pdata, struct rpma_conn **conn_ptr);
int rpma_conn_get_compl_fd(const struct rpma_conn *conn, int *fd);
/* rpma_conn_wait(3): only for connections with a shared completion channel */
int rpma_conn_wait(struct rpma_conn *conn, int flags, struct rpma_cq **cq, bool *is_rcq);
/* rpma_conn_req_recv(3): post a receive before the connection is established */
int rpma_conn_req_recv(struct rpma_conn_req *req, struct rpma_mr_local *dst, size_t offset,
	size_t len, const void *op_context);

/* ---- endpoint: rpma_ep_listen(3) ---- */

struct rpma_ep;

int rpma_ep_listen(struct rpma_peer *peer, const char *addr, const char *port,
	struct rpma_ep **ep_ptr);
int rpma_ep_shutdown(struct rpma_ep **ep_ptr);
int rpma_ep_get_fd(const struct rpma_ep *ep, int *fd);
int rpma_ep_next_conn_req(struct rpma_ep *ep, const struct rpma_conn_cfg *cfg,
	struct rpma_conn_req **req_ptr);
int rpma_conn_req_get_private_data(const struct rpma_conn_req *req,
	struct rpma_conn_private_data *pdata);

/* ---- shared receive queue configuration: rpma_srq_cfg_new(3) ---- */

struct rpma_srq_cfg;

int rpma_srq_cfg_new(struct rpma_srq_cfg **cfg_ptr);
int rpma_srq_cfg_delete(struct rpma_srq_cfg **cfg_ptr);
int rpma_srq_cfg_set_rq_size(struct rpma_srq_cfg *cfg, uint32_t rq_size);
int rpma_srq_cfg_get_rq_size(const struct rpma_srq_cfg *cfg, uint32_t *rq_size);
int rpma_srq_cfg_set_rcq_size(struct rpma_srq_cfg *cfg, uint32_t rcq_size);
int rpma_srq_cfg_get_rcq_size(const struct rpma_srq_cfg *cfg, uint32_t *rcq_size);

/* ---- shared receive queue: rpma_srq_new(3) ---- */

int rpma_srq_new(struct rpma_peer *peer, struct rpma_srq_cfg *cfg, struct rpma_srq **srq_ptr);
int rpma_srq_delete(struct rpma_srq **srq_ptr);
int rpma_srq_recv(struct rpma_srq *srq, struct rpma_mr_local *dst, size_t offset, size_t len,
	const void *op_context);
int rpma_srq_get_rcq(const struct rpma_srq *srq, struct rpma_cq **rcq_ptr);

/* ---- operations ---- */

/* completion flags; 0 is invalid */
#define RPMA_F_COMPLETION_ON_ERROR (1 << 0) /* a completion only if the operation fails */
#define RPMA_F_COMPLETION_ALWAYS (1 << 1 | RPMA_F_COMPLETION_ON_ERROR) /* always a completion */

/* rpma_read(3): remote src -> local dst; completion opcode IBV_WC_RDMA_READ */
int rpma_read(struct rpma_conn *conn, struct rpma_mr_local *dst, size_t dst_offset,
	const struct rpma_mr_remote *src, size_t src_offset, size_t len, int flags,
	const void *op_context);
/* rpma_write(3): local src -> remote dst; completion opcode IBV_WC_RDMA_WRITE */
int rpma_write(struct rpma_conn *conn, struct rpma_mr_remote *dst, size_t dst_offset,
	const struct rpma_mr_local *src, size_t src_offset, size_t len, int flags,
	const void *op_context);
/* rpma_write_with_imm(3): a write that also consumes a receive on the remote side */
int rpma_write_with_imm(struct rpma_conn *conn, struct rpma_mr_remote *dst, size_t dst_offset,
	const struct rpma_mr_local *src, size_t src_offset, size_t len, int flags, uint32_t imm,
	const void *op_context);

#define RPMA_ATOMIC_WRITE_ALIGNMENT 8

/* rpma_atomic_write(3): 8 bytes stored atomically at an 8-byte aligned remote offset */
int rpma_atomic_write(struct rpma_conn *conn, struct rpma_mr_remote *dst, size_t dst_offset,
	const char src[8], int flags, const void *op_context);

enum rpma_flush_type {
	RPMA_FLUSH_TYPE_PERSISTENT, /* durable in the remote persistence domain */
	RPMA_FLUSH_TYPE_VISIBILITY, /* visible to the remote side */
};

/* rpma_flush(3): completion opcode IBV_WC_RDMA_READ */
int rpma_flush(struct rpma_conn *conn, struct rpma_mr_remote *dst, size_t dst_offset, size_t len,
	enum rpma_flush_type type, int flags, const void *op_context);
int rpma_send(struct rpma_conn *conn, const struct rpma_mr_local *src, size_t offset, size_t len,
	int flags, const void *op_context);
int rpma_send_with_imm(struct rpma_conn *conn, const struct rpma_mr_local *src, size_t offset,
	size_t len, int flags, uint32_t imm, const void *op_context);
int rpma_recv(struct rpma_conn *conn, struct rpma_mr_local *dst, size_t offset, size_t len,
	const void *op_context);

/* ---- completion queue: rpma_cq_get_wc(3) ---- */

int rpma_cq_get_fd(const struct rpma_cq *cq, int *fd);
/* rpma_cq_wait(3): wait for one completion event and re-arm */
int rpma_cq_wait(struct rpma_cq *cq);
int rpma_cq_get_wc(struct rpma_cq *cq, int num_entries, struct ibv_wc *wc, int *num_entries_got);

/* ---- errors: rpma_err_2str(3) ---- */

const char *rpma_err_2str(int ret);

/* ---- logging: rpma_log_set_function(3) ---- */

enum rpma_log_level {
	RPMA_LOG_DISABLED = -1, /* nothing is logged */
	RPMA_LOG_LEVEL_FATAL,	/* the library cannot go on */
	RPMA_LOG_LEVEL_ERROR,	/* a call failed */
	RPMA_LOG_LEVEL_WARNING, /* something the caller may handle */
	RPMA_LOG_LEVEL_NOTICE,	/* rare events, e.g. a connection set up */
	RPMA_LOG_LEVEL_INFO,	/* frequent events, e.g. each operation */
	RPMA_LOG_LEVEL_DEBUG,	/* details for debugging */
};

enum rpma_log_threshold {
	RPMA_LOG_THRESHOLD,	/* messages above it are dropped; default WARNING */
	RPMA_LOG_THRESHOLD_AUX, /* the default function echoes to stderr at or below it */
	RPMA_LOG_THRESHOLD_MAX
};

int rpma_log_set_threshold(enum rpma_log_threshold threshold, enum rpma_log_level level);
int rpma_log_get_threshold(enum rpma_log_threshold threshold, enum rpma_log_level *level);

/* the signature of a logging function, see rpma_log_set_function(3) */
typedef void rpma_log_function(enum rpma_log_level level, const char *file_name,
	const int line_no, const char *function_name, const char *message_format, ...);

#define RPMA_LOG_USE_DEFAULT_FUNCTION (NULL)

/* rpma_log_set_function(3): NULL restores the default (syslog, plus stderr per AUX) */
int rpma_log_set_function(rpma_log_function *log_function);

#ifdef __cplusplus
}
#endif

#endif /* LIBRPMA_H */
