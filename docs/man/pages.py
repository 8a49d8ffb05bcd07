# SPDX-License-Identifier: BSD-3-Clause
"""pages.py -- the texts of the section 3 man pages; mkman.py turns them into roff.

Each page says what rpma does (src/api/*.cc and the code they call), in our own words. Every
error a page lists is one its function can return; where rpma differs from upstream librpma
(as packaged by Debian), the NOTES section says so. Markup: see mkman.py.
"""

DATE = "2026-11-25"

PAGES = []


def page(name, summary, desc, errors=(), ret=None, notes=None, see=(), extra=()):
    PAGES.append({
        "name": name,
        "summary": summary,
        "desc": desc,
        "ret": ret if ret is not None else RET_0,
        "errors": list(errors),
        "notes": notes,
        "see": list(see),
        "extra": list(extra),
    })


RET_0 = "It returns 0 on success and a negative error code on failure."


def ret_out(out):
    return RET_0 + " On failure {%s} is left unchanged." % out


# ---- errors shared by many pages ----

NOMEM = ("RPMA_E_NOMEM", "Memory could not be allocated.")
UNKNOWN = ("RPMA_E_UNKNOWN",
           "An unexpected internal failure, which the library logs. It indicates a bug.")


def inval_null(*args):
    if len(args) == 1:
        return ("RPMA_E_INVAL", "{%s} is NULL." % args[0])
    return ("RPMA_E_INVAL", "%s or {%s} is NULL." % (", ".join("{%s}" % a for a in args[:-1]),
                                                    args[-1]))


FORK = ("a forked child of the process that set up the peer's progress engine (see FORK in "
        "[[librpma]])")

POST_PROVIDER = ("RPMA_E_PROVIDER",
                 "The connection is not established yet (on the client, until "
                 "[[rpma_conn_next_event]] has returned **RPMA_CONN_ESTABLISHED**), its send "
                 "queue is full (see [[rpma_conn_cfg_set_sq_size]]), or the caller is " + FORK +
                 ".")

# rpma_conn_get_private_data, rpma_conn_req_get_private_data
PDATA_NOTE = """Upstream's pages leave the length open; this is what upstream librpma reports over
RDMA (soft-RoCE), where the connection manager carries private data in fields of a fixed size.
rpma reports the same over tcp and shm."""

# rpma_ep_listen, rpma_conn_req_new: text getaddrinfo would take as a number, not being one
PORT_BAD = ("{port} is a number above 65535, or empty, or starts with a digit, a sign or a blank "
            "without being plain decimal digits")
PORT_NOTE = """Upstream librpma takes a port above 65535 modulo 65536 ("70000" is port 4464), as
librdmacm parses it with no range check. rpma refuses it, as it refuses the other texts that
would be read as a number ("-1", " 80", "+80", an empty string): a deliberate difference."""

FLAGS = """{flags} says when the operation produces a completion on the connection's CQ:

= **RPMA_F_COMPLETION_ALWAYS**
always, whether it succeeds or fails;
= **RPMA_F_COMPLETION_ON_ERROR**
only if it fails.

A {flags} of 0 is refused. As in upstream librpma, a success completes when the bit that
**RPMA_F_COMPLETION_ALWAYS** adds to **RPMA_F_COMPLETION_ON_ERROR** is set, and a failure always
completes; other bits are ignored. An operation without a completion keeps its send-queue slot
until a later operation with a completion completes, as on hardware NICs (soft-RoCE frees it at
once), so a program that asks for no completions at all soon finds the send queue full."""

CONTEXT = """{op_context} is not dereferenced; it comes back as the {wr_id} of the completion
(**struct ibv_wc**, see [[rpma_cq_get_wc]])."""

ERROR_STATE = """Posting never waits for the network. On a connection whose queue pair is in the
error state (after an error completion), or that is being disconnected or is closed, the call
still returns 0 and the operation completes with **IBV_WC_WR_FLUSH_ERR**, as a post to a verbs
queue pair in the error state does."""

REMOTE_CHECK = """The remote side checks the remote range and usage when it executes the operation,
not when it is posted: the rkey must name a region its peer still has registered, the range must
lie inside it, and the region must have been registered with the usage the operation needs. A
violation leaves the remote memory untouched and comes back as a completion with status
**IBV_WC_REM_ACCESS_ERR**, after which the connection's queue pair is in the error state."""

LOCAL_CHECK = """The local range must lie inside the local region (checked when posting). As a NIC
checks the lkey, the local region must also belong to the connection's peer, and a region the
operation writes into (a read's destination) must have a usage that allows local writes:
**RPMA_MR_USAGE_READ_DST**, **RPMA_MR_USAGE_WRITE_SRC**, **RPMA_MR_USAGE_WRITE_DST** or
**RPMA_MR_USAGE_RECV**. A region the operation only reads (a write's or a send's source) may have
any usage. If not, the call still returns 0, the operation completes with
**IBV_WC_LOC_PROT_ERR** without touching memory, and the queue pair enters the error state. None
of this is checked for a range of 0 bytes, which touches no memory, as a NIC checks no empty
scatter entry."""

MAX_LEN = """An operation moves at most 1 GiB over tcp and shm, and at most the port's
{max_msg_sz} over the verbs provider (**ibv_query_port**(3); 8 MiB on soft-RoCE); a larger {len}
is refused."""


# ---- configuration getters and setters ----

def cfg_pair(obj, field, typ, what, set_desc, get_desc=None, set_errors=None, notes=None,
             see=(), arg=None, ptr=None):
    arg = arg or field
    ptr = ptr or arg
    cfg = "pcfg" if obj == "peer" else "cfg"
    setter = "rpma_%s_cfg_set_%s" % (obj, field)
    getter = "rpma_%s_cfg_get_%s" % (obj, field)
    page(setter, "set the %s of a %s configuration" % (what, CFG_NAMES[obj]),
         set_desc,
         errors=set_errors or [inval_null(cfg)],
         notes=notes, see=[getter, "rpma_%s_cfg_new" % obj] + list(see))
    page(getter, "get the %s of a %s configuration" % (what, CFG_NAMES[obj]),
         get_desc or ("**%s**() stores in {*%s} the %s of the configuration {%s}, as set by "
                      "[[%s]] or the default." % (getter, ptr, what, cfg, setter)),
         ret=ret_out("*" + ptr),
         errors=[inval_null(cfg, ptr)],
         see=[setter, "rpma_%s_cfg_new" % obj] + list(see))


CFG_NAMES = {"conn": "connection", "srq": "shared receive queue", "peer": "peer"}


# =============================================================================================
# operations

page("rpma_read", "read from a remote memory region into a local one",
     """**rpma_read**() posts a read of {len} bytes at offset {src_offset} of the remote region
{src} into offset {dst_offset} of the local region {dst}, on the connection {conn}. The remote
region must have been registered with **RPMA_MR_USAGE_READ_SRC** or a flush usage (they give
remote reads: [[rpma_mr_reg]]) and the local one with
**RPMA_MR_USAGE_READ_DST** (or another usage that allows local writes, below). The data is in
{dst} when the operation completes successfully; the completion has opcode **IBV_WC_RDMA_READ**
and {byte_len} {len}.

A read of 0 bytes names no regions: {dst} and {src} are NULL and both offsets 0. It still takes
its turn among the connection's operations.

""" + FLAGS + "\n\n" + CONTEXT + "\n\n" + REMOTE_CHECK + "\n\n" + LOCAL_CHECK + "\n\n"
     + ERROR_STATE + "\n\n" + MAX_LEN,
     errors=[("RPMA_E_INVAL", "{conn} is NULL; {flags} is 0; only one of {dst} and {src} is "
              "NULL, or both are and an offset or {len} is not 0; the range does not fit in "
              "{dst}; or {len} is over the limit below."), POST_PROVIDER, NOMEM, UNKNOWN],
     see=["rpma_write", "rpma_mr_reg", "rpma_mr_remote_from_descriptor", "rpma_cq_get_wc",
          "rpma_conn_req_connect"])

WRITE_DESC = """posts a write of {len} bytes from offset {src_offset} of the local region {src}
to offset {dst_offset} of the remote region {dst}, on the connection {conn}. The local region is
meant to be registered with **RPMA_MR_USAGE_WRITE_SRC** (any region of the peer will do, as only
its bytes are read) and the remote one must have been registered with
**RPMA_MR_USAGE_WRITE_DST**. The source bytes are read while the operation is under way, not
when it is posted: do not change them before the operation completes."""

WRITE_AFTER = """A completion says the remote side has placed the data in its memory, in order
after everything posted before on the connection; it does not make the data persistent. Follow
the write with [[rpma_flush]] for that.

A write of 0 bytes names no regions: {dst} and {src} are NULL and both offsets 0."""

page("rpma_write", "write from a local memory region to a remote one",
     "**rpma_write**() " + WRITE_DESC + """ The completion has opcode **IBV_WC_RDMA_WRITE** and
{byte_len} {len}.

""" + WRITE_AFTER + "\n\n" + FLAGS + "\n\n" + CONTEXT + "\n\n" + REMOTE_CHECK + "\n\n"
     + LOCAL_CHECK + "\n\n" + ERROR_STATE + "\n\n" + MAX_LEN,
     errors=[("RPMA_E_INVAL", "{conn} is NULL; {flags} is 0; only one of {dst} and {src} is "
              "NULL, or both are and an offset or {len} is not 0; the range does not fit in "
              "{src}; or {len} is over the limit below."), POST_PROVIDER, NOMEM, UNKNOWN],
     see=["rpma_write_with_imm", "rpma_atomic_write", "rpma_flush", "rpma_read", "rpma_mr_reg",
          "rpma_mr_remote_from_descriptor", "rpma_cq_get_wc"])

IMM_RECV = """The remote side's receive completes with opcode **IBV_WC_RECV_RDMA_WITH_IMM**,
**IBV_WC_WITH_IMM** set in {wc_flags}, and {imm} in {imm_data} in network byte order (the
receiver reads it with [[ntohl(3)]])."""

page("rpma_write_with_imm", "write to a remote memory region and hand the peer a 32-bit value",
     "**rpma_write_with_imm**() " + WRITE_DESC + """ It also consumes one receive posted on the
remote side ([[rpma_recv]], or [[rpma_srq_recv]] with a shared receive queue), which tells the
remote application the data has arrived. """ + IMM_RECV + """ The write's own completion has
opcode **IBV_WC_RDMA_WRITE**, {byte_len} {len}, and **IBV_WC_WITH_IMM** set in {wc_flags}.

If the remote side has no receive posted, the write waits at the remote side until one is posted,
and with it every later operation of this connection (as with an infinite RNR retry count). The
remote side takes the receive before it checks the write: a write it refuses (see below) completes
that receive with the same error, **IBV_WC_REM_ACCESS_ERR**, as rxe does.

""" + WRITE_AFTER + "\n\n" + FLAGS + "\n\n" + CONTEXT + "\n\n" + REMOTE_CHECK + "\n\n"
     + LOCAL_CHECK + "\n\n" + ERROR_STATE + "\n\n" + MAX_LEN,
     errors=[("RPMA_E_INVAL", "{conn} is NULL; {flags} is 0; only one of {dst} and {src} is "
              "NULL, or both are and an offset or {len} is not 0; the range does not fit in "
              "{src}; or {len} is over the limit below."), POST_PROVIDER, NOMEM, UNKNOWN],
     see=["rpma_write", "rpma_send_with_imm", "rpma_recv", "rpma_cq_get_wc"])

page("rpma_atomic_write", "write 8 bytes to a remote memory region atomically",
     """**rpma_atomic_write**() posts a write of the 8 bytes at {src} to offset {dst_offset}
of the remote region {dst}, on the connection {conn}. {src} is ordinary memory, not a registered
region: the 8 bytes are copied before the call returns. {dst_offset} must be a multiple of
**RPMA_ATOMIC_WRITE_ALIGNMENT** (8), and the remote region must have been registered with
**RPMA_MR_USAGE_WRITE_DST**.

The remote side stores the value with one aligned 8-byte store: a reader there sees the old value
or the new one, never a mix. If the remote region itself does not start at an 8-byte aligned
address, the target address is misaligned and the operation completes with
**IBV_WC_REM_INV_REQ_ERR**. The completion has opcode **IBV_WC_RDMA_WRITE** and {byte_len} 8.
As with
[[rpma_write]], a completion does not make the value persistent; use [[rpma_flush]].

""" + FLAGS + "\n\n" + CONTEXT + "\n\n" + REMOTE_CHECK + "\n\n" + ERROR_STATE,
     errors=[("RPMA_E_INVAL", "{conn}, {dst} or {src} is NULL, {flags} is 0, or {dst_offset} "
              "is not a multiple of 8."), POST_PROVIDER, NOMEM, UNKNOWN],
     see=["rpma_write", "rpma_flush", "rpma_mr_remote_from_descriptor", "rpma_cq_get_wc"],
     extra=["#define RPMA_ATOMIC_WRITE_ALIGNMENT"])

page("rpma_flush", "make earlier writes visible or persistent at the remote side",
     """**rpma_flush**() posts a flush of {len} bytes at offset {dst_offset} of the remote
region {dst}, on the connection {conn}. Operations on a connection execute at the remote side in
the order they were posted, so when the flush completes, everything posted before it on this
connection has been executed there, and the flushed range has reached the point {type} asks
for:

= **RPMA_FLUSH_TYPE_VISIBILITY**
the data is in the remote memory, visible to the remote CPUs. The remote region must have been
registered with **RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY**.
= **RPMA_FLUSH_TYPE_PERSISTENT**
the data is durable: before it answers, the remote side calls [[msync(2)]] with **MS_SYNC** over
the pages that hold the range, which writes a file-backed shared mapping to its file and, on a
DAX mapping of persistent memory, writes back the CPU caches. The remote region must have been
registered with **RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT**, and the remote peer must have said it
supports this: its peer configuration, sent over and applied with
[[rpma_conn_apply_remote_peer_cfg]], has {direct_write_to_pmem} set.

Both requirements are checked when posting, from the flush usage the remote region's descriptor
carries ([[rpma_mr_remote_get_flush_type]]); a flush that does not meet them is refused with
**RPMA_E_NOSUPP**. The remote side checks the flush when it executes it, as RDMA hardware checks
the 8-byte read that carries a flush out: the 8 bytes at {dst_offset} must lie inside the remote
region, whatever {len}, or the flush completes with **IBV_WC_REM_ACCESS_ERR**. So a flush at the
region's last byte fails, and one that runs past the region's end from a valid offset does not;
a **RPMA_FLUSH_TYPE_PERSISTENT** flush makes durable the part of the range inside the region.
A flush moves no data, so no {len} is too long: one of **SIZE_MAX** bytes covers the rest of the
region.

The completion has opcode **IBV_WC_RDMA_READ** and {byte_len} 8, whatever {len}, as on RDMA
hardware, where librpma carries a flush out as an 8-byte read.

""" + FLAGS + "\n\n" + CONTEXT + "\n\n" + ERROR_STATE,
     errors=[("RPMA_E_INVAL", "{conn} or {dst} is NULL, {flags} is 0, or {type} is neither "
              "**RPMA_FLUSH_TYPE_PERSISTENT** nor **RPMA_FLUSH_TYPE_VISIBILITY**."),
             ("RPMA_E_NOSUPP", "{type} is **RPMA_FLUSH_TYPE_PERSISTENT** and no remote peer "
              "configuration with {direct_write_to_pmem} was applied to the connection, or the "
              "remote region was not registered for this flush type."),
             POST_PROVIDER, NOMEM, UNKNOWN],
     see=["rpma_write", "rpma_atomic_write", "rpma_conn_apply_remote_peer_cfg",
          "rpma_peer_cfg_set_direct_write_to_pmem", "rpma_mr_remote_get_flush_type",
          "rpma_mr_reg", "rpma_cq_get_wc"],
     extra=["enum rpma_flush_type"])

SEND_COMMON = """The message goes into a receive the remote side has posted on its connection
([[rpma_recv]], [[rpma_conn_req_recv]]) or on its shared receive queue ([[rpma_srq_recv]]). If
none is posted, the message waits at the remote side until one is, and with it every later
operation of this connection (as with an infinite RNR retry count). A message longer than the
receive buffer completes the receive with **IBV_WC_LOC_LEN_ERR** and the send with
**IBV_WC_REM_INV_REQ_ERR**, and both queue pairs enter the error state. A send into a receive
buffer that the remote side's region does not allow (its region has no usage that allows local
writes, or was deregistered) completes with **IBV_WC_REM_OP_ERR**.

The local region is meant to be registered with **RPMA_MR_USAGE_SEND** (any region of the peer
will do, as only its bytes are read); they are read while the operation is under way, so do not
change them before it completes. A message of 0 bytes names no region: {src} is NULL and
{offset} and {len} are 0. The send's completion has opcode **IBV_WC_SEND** and {byte_len}
{len}.

""" + FLAGS + "\n\n" + CONTEXT + "\n\n" + LOCAL_CHECK + "\n\n" + ERROR_STATE + "\n\n" + MAX_LEN

SEND_INVAL = ("RPMA_E_INVAL", "{conn} is NULL, {flags} is 0, {src} is NULL while {offset} or "
              "{len} is not 0, the range does not fit in {src}, or {len} is over the limit below.")

page("rpma_send", "send a message to the remote side",
     """**rpma_send**() posts a message of {len} bytes, taken from offset {offset} of the local
region {src}, on the connection {conn}. The remote side's receive completes with opcode
**IBV_WC_RECV** and {byte_len} {len}.

""" + SEND_COMMON,
     errors=[SEND_INVAL, POST_PROVIDER, NOMEM, UNKNOWN],
     see=["rpma_send_with_imm", "rpma_recv", "rpma_srq_recv", "rpma_mr_reg", "rpma_cq_get_wc"])

page("rpma_send_with_imm", "send a message and a 32-bit value to the remote side",
     """**rpma_send_with_imm**() is [[rpma_send]] with a 32-bit value {imm} attached. The remote
side's receive completes with opcode **IBV_WC_RECV**, {byte_len} {len}, **IBV_WC_WITH_IMM**
set in {wc_flags}, and {imm} in {imm_data} in network byte order (the receiver reads it with
[[ntohl(3)]]). The send's own completion has **IBV_WC_WITH_IMM** set in {wc_flags} as well.

""" + SEND_COMMON,
     errors=[SEND_INVAL, POST_PROVIDER, NOMEM, UNKNOWN],
     see=["rpma_send", "rpma_write_with_imm", "rpma_recv", "rpma_cq_get_wc"])

RECV_COMMON = """The region must belong to the same peer and have been registered with
**RPMA_MR_USAGE_RECV** or another usage that allows local writes (**RPMA_MR_USAGE_READ_DST**,
**RPMA_MR_USAGE_WRITE_SRC**, **RPMA_MR_USAGE_WRITE_DST**). This is checked when a message
arrives for the receive, as a NIC checks the lkey: the receive then completes with **IBV_WC_LOC_PROT_ERR** without touching memory, the
sender's operation with **IBV_WC_REM_OP_ERR**, and the queue pair enters the error state. A
message longer than {len} completes the receive with **IBV_WC_LOC_LEN_ERR**. The range must lie
inside the region. Neither the range nor the region is checked when {len} is 0: an empty receive
touches no memory.

Each receive takes one incoming message ([[rpma_send]], [[rpma_send_with_imm]]) or one
[[rpma_write_with_imm]]. Its completion has opcode **IBV_WC_RECV** (or
**IBV_WC_RECV_RDMA_WITH_IMM** for a write with immediate data), {byte_len} the message length, and
{op_context} as {wr_id}; {op_context} is not dereferenced. Do not rely on the order in which
posted receives are taken.

""" + MAX_LEN

page("rpma_recv", "post a receive buffer on a connection",
     """**rpma_recv**() posts a receive of at most {len} bytes into offset {offset} of the local
region {dst}, on the connection {conn}. A receive of 0 bytes names no region: {dst} is NULL and
{offset} and {len} are 0; it can take only a message of 0 bytes, or a write with immediate
data.

Its completion goes to the connection's receive CQ if it has one
([[rpma_conn_cfg_set_rcq_size]]), else to its main CQ. A connection that takes its receives from
a shared receive queue ([[rpma_conn_cfg_set_srq]]) has no receive queue of its own: post with
[[rpma_srq_recv]] instead. At most the configured RQ size ([[rpma_conn_cfg_set_rq_size]]) of
receives may wait at once.

""" + RECV_COMMON + """

On a connection whose queue pair is in the error state the call still returns 0 and the receive
completes with **IBV_WC_WR_FLUSH_ERR**.""",
     errors=[("RPMA_E_INVAL", "{conn} is NULL, {dst} is NULL while {offset} or {len} is not 0, "
              "the range does not fit in {dst}, or {len} is over the limit below."),
             ("RPMA_E_PROVIDER", "The receive queue is full, the connection uses a shared "
              "receive queue, or the caller is " + FORK + "."),
             NOMEM, UNKNOWN],
     see=["rpma_conn_req_recv", "rpma_srq_recv", "rpma_send", "rpma_cq_get_wc",
          "rpma_conn_get_rcq"])

page("rpma_conn_req_recv", "post a receive buffer before the connection is established",
     """**rpma_conn_req_recv**() posts a receive of at most {len} bytes into offset {offset} of
the local region {dst} on the queue pair of the connection request {req}, so that a message the
remote side sends as soon as the connection is up finds a buffer. It works as [[rpma_recv]] on
the connection that [[rpma_conn_req_connect]] makes of {req}; unlike [[rpma_recv]], {dst} may
not be NULL. The completion arrives on that connection's receive CQ, or its main CQ.

""" + RECV_COMMON,
     errors=[("RPMA_E_INVAL", "{req} or {dst} is NULL, the range does not fit in {dst}, or "
              "{len} is over the limit below."),
             ("RPMA_E_PROVIDER", "The receive queue is full, the request's configuration "
              "names a shared receive queue, or the caller is " + FORK + "."),
             NOMEM, UNKNOWN],
     see=["rpma_recv", "rpma_conn_req_new", "rpma_ep_next_conn_req", "rpma_conn_req_connect"])

# =============================================================================================
# completion queues

page("rpma_cq_get_fd", "get the file descriptor of a completion queue",
     """**rpma_cq_get_fd**() stores in {*fd} the file descriptor of the completion channel of
{cq}. It becomes readable when the CQ has posted a completion event, so it can be watched with
[[poll(2)]] or [[epoll(7)]]. When a connection's CQ and RCQ share one channel
([[rpma_conn_cfg_set_compl_channel]]) both give the same descriptor, also returned by
[[rpma_conn_get_compl_fd]].

The descriptor belongs to the library; do not close it. It stays valid until the connection (or
shared receive queue) that owns {cq} is deleted. It is blocking; setting **O_NONBLOCK** on it
with [[fcntl(2)]] makes [[rpma_cq_wait]] and [[rpma_conn_wait]] return instead of blocking.""",
     ret=ret_out("*fd"),
     errors=[inval_null("cq", "fd")],
     see=["rpma_cq_wait", "rpma_cq_get_wc", "rpma_conn_get_cq"])

page("rpma_cq_wait", "wait for a completion event on a completion queue",
     """**rpma_cq_wait**() waits until {cq} posts a completion event, consumes the event and
re-arms the CQ. A CQ is armed when it is created and posts one event for the first completion
that arrives while it is armed; so after a wake-up collect completions with [[rpma_cq_get_wc]]
until it returns **RPMA_E_NO_COMPLETION**, then wait again.

It blocks unless the CQ's file descriptor ([[rpma_cq_get_fd]]) was made non-blocking, in which
case it returns **RPMA_E_NO_COMPLETION** when no event is pending. A thread blocked here on a
connection's main CQ reads the connection's answers itself, rather than waiting for the peer's
progress thread to do so.

A blocking call returns at once while {cq} still holds completions, where **ibv_get_cq_event**(3)
would wait for a new one; so two threads waiting on one CQ may both return for one completion.
Threads waiting on different CQs of one connection (its CQ and its RCQ) each wake for their own.

A CQ whose completion channel is shared with the other CQ of its connection cannot be waited on
alone: use [[rpma_conn_wait]].""",
     errors=[inval_null("cq"),
             ("RPMA_E_SHARED_CHANNEL", "The CQ's completion channel is shared "
              "([[rpma_conn_cfg_set_compl_channel]])."),
             ("RPMA_E_NO_COMPLETION", "The descriptor is non-blocking and no event is pending."),
             ("RPMA_E_PROVIDER", "Verbs provider: **ibv_get_cq_event**(3) or "
              "**ibv_req_notify_cq**(3) failed."),
             NOMEM, UNKNOWN],
     see=["rpma_cq_get_wc", "rpma_cq_get_fd", "rpma_conn_wait", "rpma_conn_get_cq"])

page("rpma_cq_get_wc", "take completions from a completion queue",
     """**rpma_cq_get_wc**() moves up to {num_entries} completions from {cq} into the array {wc},
oldest first, and stores their number in {*num_entries_got}. {num_entries_got} may be NULL only
when {num_entries} is 1. It never waits: with no completion ready it returns
**RPMA_E_NO_COMPLETION**. That is normal after [[rpma_cq_wait]] returned for a completion a
previous call already took, so drain a CQ until this code comes back.

The fields of a completion:

= {wr_id}
the {op_context} given when the operation or receive was posted;
= {status}
**IBV_WC_SUCCESS**, or the reason it failed (for example **IBV_WC_REM_ACCESS_ERR**,
**IBV_WC_LOC_PROT_ERR**, **IBV_WC_WR_FLUSH_ERR**);
= {opcode}
**IBV_WC_RDMA_READ** ([[rpma_read]], [[rpma_flush]]), **IBV_WC_RDMA_WRITE** ([[rpma_write]],
[[rpma_write_with_imm]], [[rpma_atomic_write]]), **IBV_WC_SEND**, **IBV_WC_RECV** or
**IBV_WC_RECV_RDMA_WITH_IMM**;
= {byte_len}
the bytes moved, for receives and for successful reads, writes and sends; 8 for an atomic write
and for a flush (an 8-byte read on RDMA);
= {wc_flags}, {imm_data}
**IBV_WC_WITH_IMM** and the immediate value in network byte order, for receives of data sent with
one; **IBV_WC_WITH_IMM** alone for the successful completion of [[rpma_send_with_imm]] and
[[rpma_write_with_imm]] at the side that posted them;
= {qp_num}
the number of the local connection's queue pair ([[rpma_conn_get_qp_num]]); with a shared receive
queue it tells which connection a message came through.

For a completion with an error status only {wr_id}, {status} and {qp_num} are meaningful. The
first error puts the connection's queue pair in the error state: its other outstanding
operations and posted receives complete with **IBV_WC_WR_FLUSH_ERR**.""",
     ret=RET_0 + " On failure nothing is taken from the CQ.",
     errors=[("RPMA_E_INVAL", "{cq} or {wc} is NULL, {num_entries} is less than 1, or "
              "{num_entries} is over 1 and {num_entries_got} is NULL."),
             ("RPMA_E_NO_COMPLETION", "No completion is ready."),
             ("RPMA_E_PROVIDER", "Verbs provider: **ibv_poll_cq**(3) failed."),
             NOMEM, UNKNOWN],
     notes="""Over tcp and shm completion queues grow as needed, so no completion is ever lost to
a CQ overrun; the verbs provider's CQs have the configured sizes, as upstream's.""",
     see=["rpma_cq_wait", "rpma_conn_get_cq", "rpma_conn_get_rcq", "rpma_srq_get_rcq",
          "rpma_conn_wait"])

# =============================================================================================
# connections

page("rpma_conn_get_event_fd", "get the file descriptor of a connection's events",
     """**rpma_conn_get_event_fd**() stores in {*fd} a file descriptor that is readable while
the connection {conn} has an event waiting for [[rpma_conn_next_event]]. Each connection has its
own. The descriptor belongs to the connection: do not close it; it is valid until
[[rpma_conn_delete]]. It is blocking; after setting **O_NONBLOCK** on it with [[fcntl(2)]],
[[rpma_conn_next_event]] returns **RPMA_E_NO_EVENT** instead of blocking. Change the mode while no
other thread is inside [[rpma_conn_next_event]]: over an RDMA device that call makes the
descriptor non-blocking for the length of its read and then puts the mode back, which can undo a
change made at the same moment.""",
     ret=ret_out("*fd"),
     errors=[inval_null("conn", "fd")],
     see=["rpma_conn_next_event"])

page("rpma_conn_next_event", "take the next event of a connection",
     """**rpma_conn_next_event**() takes the oldest event of the connection {conn} and stores it
in {*event}. With no event waiting it blocks, unless the connection's event descriptor
([[rpma_conn_get_event_fd]]) was made non-blocking. The events:

= **RPMA_CONN_ESTABLISHED**
The connection is up. On the client, the server's private data is available
([[rpma_conn_get_private_data]]) once this call has returned the event. On the server the event
is queued as soon as [[rpma_conn_req_connect]] accepts.
= **RPMA_CONN_CLOSED**
The connection was closed: by either side with [[rpma_conn_disconnect]] or by deleting an
established connection, or because the remote process ended (exited or was killed: its kernel
closes its connections, as it disconnects them on RDMA).
= **RPMA_CONN_LOST**
The connection broke: the network failed, the remote side stopped answering for longer than the
dead-peer timeout (**RPMA_DEAD_PEER_TIMEOUT_MS**, see [[librpma]]), or it broke the protocol.
= **RPMA_CONN_REJECTED**
Client only: the server rejected the request ([[rpma_conn_req_delete]]), or nothing listens at
the address (the TCP connection was refused).
= **RPMA_CONN_UNREACHABLE**
Client only: the TCP set-up did not finish within the configured timeout
([[rpma_conn_cfg_set_timeout]]), the network was unreachable, or the server did not answer the
request within 30 seconds.

After **RPMA_CONN_CLOSED** or **RPMA_CONN_LOST**, operations still outstanding and receives still
posted complete with **IBV_WC_WR_FLUSH_ERR**, so no waiter is left hanging (on RDMA that happens
only once this side disconnects too, so a portable program calls [[rpma_conn_disconnect]] before
it waits for them). The usual end is [[rpma_conn_delete]].""",
     ret=ret_out("*event"),
     errors=[inval_null("conn", "event"),
             ("RPMA_E_NO_EVENT", "The event descriptor is non-blocking and no event is "
              "waiting; or, verbs provider, the only event waiting was one rpma does not report "
              "(the second close, rdma_cm's **RDMA_CM_EVENT_TIMEWAIT_EXIT**), even on a blocking "
              "descriptor."),
             ("RPMA_E_PROVIDER", "Verbs provider: **rdma_get_cm_event**(3) failed; the event, "
              "if any, stays for the next call.")],
     notes="""Over tcp and shm the events come from a queue of the library's own, which cannot
fail. Upstream librpma may also return **RPMA_E_NOMEM** or **RPMA_E_UNKNOWN** when the
connection manager reports an unexpected event; the verbs provider passes over events it has no
name for.""",
     see=["rpma_conn_get_event_fd", "rpma_utils_conn_event_2str", "rpma_conn_disconnect",
          "rpma_conn_delete"],
     extra=["enum rpma_conn_event"])

page("rpma_conn_get_private_data", "get the private data the remote side sent at set-up",
     """**rpma_conn_get_private_data**() fills {*pdata} with the address and length of the
private data the remote side sent when the connection was set up, as the RDMA connection manager
delivers it: the whole field, the bytes the remote side passed first and zeros after them. So
{len} is always 196 on the client and 56 on the server, and {ptr} is not NULL even when the
remote side passed no private data; a protocol that needs the length sends it in the data.

On the client that is what the server passed to [[rpma_conn_req_connect]] when accepting,
available once [[rpma_conn_next_event]] has returned **RPMA_CONN_ESTABLISHED**; until then {ptr}
is NULL and {len} 0. On the server it is what the client sent with its request, as
[[rpma_conn_req_get_private_data]] showed it.

The bytes belong to the connection: do not change or free them; they stay valid until
[[rpma_conn_delete]].""",
     ret=ret_out("*pdata"),
     errors=[inval_null("conn", "pdata")],
     notes=PDATA_NOTE,
     see=["rpma_conn_req_get_private_data", "rpma_conn_req_connect"],
     extra=["struct rpma_conn_private_data"])

page("rpma_conn_apply_remote_peer_cfg", "tell a connection what the remote peer supports",
     """**rpma_conn_apply_remote_peer_cfg**() applies the remote peer's configuration {pcfg} to
the connection {conn}; {pcfg} is typically rebuilt with [[rpma_peer_cfg_from_descriptor]] from a
descriptor the remote side sent. It carries one property: whether the remote side writes
directly to persistent memory ([[rpma_peer_cfg_set_direct_write_to_pmem]]). Only then does
[[rpma_flush]] accept **RPMA_FLUSH_TYPE_PERSISTENT** on this connection.

The value is copied, so {pcfg} may be deleted afterwards. It applies to flushes posted after
the call; a later call replaces it.""",
     errors=[inval_null("conn", "pcfg")],
     see=["rpma_flush", "rpma_peer_cfg_from_descriptor",
          "rpma_peer_cfg_set_direct_write_to_pmem"])

page("rpma_conn_get_qp_num", "get the number of a connection's queue pair",
     """**rpma_conn_get_qp_num**() stores in {*qp_num} the number of the local queue pair of
the connection {conn}: a non-zero 24-bit value, different for each connection of the process.
Completions of the connection carry it in {qp_num}; with a shared receive queue it tells which
connection a message arrived on.""",
     ret=ret_out("*qp_num"),
     errors=[inval_null("conn", "qp_num")],
     see=["rpma_cq_get_wc", "rpma_srq_new"])

page("rpma_conn_get_cq", "get the main completion queue of a connection",
     """**rpma_conn_get_cq**() stores in {*cq_ptr} the main completion queue of the connection
{conn}. It receives the completions of the connection's operations, and of its receives too
unless the connection has a receive CQ ([[rpma_conn_cfg_set_rcq_size]]) or takes its receives
from a shared receive queue with a CQ of its own. The CQ belongs to the connection and is
freed by [[rpma_conn_delete]].""",
     ret=ret_out("*cq_ptr"),
     errors=[inval_null("conn", "cq_ptr")],
     see=["rpma_conn_get_rcq", "rpma_cq_wait", "rpma_cq_get_wc"])

page("rpma_conn_get_rcq", "get the receive completion queue of a connection",
     """**rpma_conn_get_rcq**() stores in {*rcq_ptr} the receive completion queue (RCQ) of the
connection {conn}, or NULL when it has none. A connection has an RCQ when its configuration's
RCQ size ([[rpma_conn_cfg_set_rcq_size]]) is not 0; its receive completions then go there instead
of to the main CQ, so they can be handled apart. A connection whose shared receive queue has a CQ
of its own ([[rpma_srq_get_rcq]]) gets its receive completions on that CQ instead. The RCQ belongs
to the connection and is freed by [[rpma_conn_delete]].""",
     ret=ret_out("*rcq_ptr"),
     errors=[inval_null("conn", "rcq_ptr")],
     see=["rpma_conn_get_cq", "rpma_conn_cfg_set_rcq_size", "rpma_srq_get_rcq"])

page("rpma_conn_get_compl_fd", "get the file descriptor of a shared completion channel",
     """**rpma_conn_get_compl_fd**() stores in {*fd} the file descriptor of the completion
channel that the main CQ and the RCQ of {conn} share ([[rpma_conn_cfg_set_compl_channel]]). It
is readable when either CQ has posted a completion event; [[rpma_conn_wait]] consumes the event
and tells which CQ it was. The descriptor belongs to the connection: do not close it.""",
     ret=ret_out("*fd"),
     errors=[inval_null("conn", "fd"),
             ("RPMA_E_NOT_SHARED_CHNL", "The connection's CQs do not share a completion "
              "channel.")],
     see=["rpma_conn_wait", "rpma_conn_cfg_set_compl_channel", "rpma_cq_get_fd"])

page("rpma_conn_wait", "wait for a completion event on a shared completion channel",
     """**rpma_conn_wait**() waits for the next completion event on the completion channel that
the CQ and the RCQ of {conn} share ([[rpma_conn_cfg_set_compl_channel]]), re-arms the CQ that
posted it and stores that CQ in {*cq}. If {is_rcq} is not NULL, {*is_rcq} tells whether it is
the RCQ. Take its completions with [[rpma_cq_get_wc]] until **RPMA_E_NO_COMPLETION**.

With **RPMA_W_WAIT_FOR_COMPLETION** in {flags}, an event whose CQ is already empty (its
completions were taken after an earlier wake-up) is skipped and the call goes on waiting. Other
bits of {flags} are ignored.

It blocks unless the channel's descriptor ([[rpma_conn_get_compl_fd]]) was made non-blocking,
in which case it returns **RPMA_E_NO_COMPLETION** when no event is pending.""",
     ret=ret_out("*cq"),
     errors=[inval_null("conn", "cq"),
             ("RPMA_E_NOT_SHARED_CHNL", "The connection has no shared completion channel."),
             ("RPMA_E_NO_COMPLETION", "The descriptor is non-blocking and no event is "
              "pending.")],
     see=["rpma_conn_get_compl_fd", "rpma_conn_cfg_set_compl_channel", "rpma_cq_get_wc",
          "rpma_cq_wait"],
     extra=["#define RPMA_W_WAIT_FOR_COMPLETION"])

page("rpma_conn_disconnect", "start an orderly close of a connection",
     """**rpma_conn_disconnect**() asks for an orderly close of the connection {conn} and
returns at once. A Disconnect goes to the remote side after everything posted before the call;
the remote side answers with its own, and then both sides get **RPMA_CONN_CLOSED**
([[rpma_conn_next_event]]). Operations posted after the call complete with
**IBV_WC_WR_FLUSH_ERR**.

The usual sequence: the side that ends the connection calls **rpma_conn_disconnect**(), waits
for **RPMA_CONN_CLOSED**, and calls [[rpma_conn_delete]]; the other side gets
**RPMA_CONN_CLOSED**, then does the same.

On a connection still being set up (no **RPMA_CONN_ESTABLISHED** queued yet) it ends the
set-up: the connection gets **RPMA_CONN_LOST**, as the RDMA connection manager reports a server's
answer that finds the queue pair in the error state **rdma_disconnect**(3) left, and never
**RPMA_CONN_ESTABLISHED**. A server that accepted it meanwhile sees its connection end
(**RPMA_CONN_CLOSED**, at the latest when this side deletes the connection).
On a connection already closed or lost, or disconnected before, it does nothing and returns
0.""",
     errors=[inval_null("conn"),
             ("RPMA_E_PROVIDER", "The caller is " + FORK + ", or, verbs provider, "
              "**rdma_disconnect**(3) failed."),
             NOMEM, UNKNOWN],
     see=["rpma_conn_delete", "rpma_conn_next_event"])

page("rpma_conn_delete", "delete a connection",
     """**rpma_conn_delete**() deletes the connection {*conn_ptr}, with its CQs, event
descriptor and queues, and sets {*conn_ptr} to NULL. With {*conn_ptr} NULL it does nothing and
returns 0.

A connection still established, whether or not [[rpma_conn_disconnect]] was called, is closed in
order as well, as **rdma_destroy_id**(3) would: the remote side gets **RPMA_CONN_CLOSED**, not
**RPMA_CONN_LOST**. The call returns at once and the library finishes the close by itself: it
drops the operations that had not left yet (without completions), finishes a message already
half sent, and waits up to 2 seconds for the remote side to close its end.

After it returns the library no longer touches the connection's CQs, descriptors and receive
buffers.""",
     errors=[inval_null("conn_ptr"),
             ("RPMA_E_PROVIDER", "The caller is " + FORK + "; the connection is left to the "
              "parent, which it keeps working for, and {*conn_ptr} is set to NULL, as on any "
              "failure.")],
     notes="""Upstream librpma returns **RPMA_E_PROVIDER** when the verbs or connection manager
objects cannot be destroyed; in rpma that cannot happen, and the code means only the forked
child case.""",
     see=["rpma_conn_disconnect", "rpma_conn_req_connect"])

# =============================================================================================
# connection requests and endpoints

CFG_CLASH = ("{cfg} asks for a shared completion channel together with a shared receive queue "
             "that has its own CQ")

page("rpma_conn_req_new", "create an outgoing connection request",
     """**rpma_conn_req_new**() creates a request to connect to {addr} and {port} through the
peer {peer}, and stores it in {*req_ptr}. {addr} is a host name or a numeric IPv4 or IPv6
address and {port} a port number or service name, both resolved with [[getaddrinfo(3)]] now. A
port number is plain decimal digits, at most 65535. A wildcard address (0.0.0.0, ::) names no
host to connect to.
The connection's CQs and queues are made now, per {cfg} (NULL means the defaults of
[[rpma_conn_cfg_new]]); {cfg} is not used after the call returns, except that a shared receive
queue it names must stay alive as long as the request or its connection does.

Nothing is sent yet. Receives may be posted with [[rpma_conn_req_recv]];
[[rpma_conn_req_connect]] starts connecting, and [[rpma_conn_req_delete]] gives the request up.
The first request or endpoint of a peer starts the peer's progress thread.""",
     ret=ret_out("*req_ptr"),
     errors=[("RPMA_E_INVAL", "{peer}, {addr}, {port} or {req_ptr} is NULL; " + PORT_BAD
              + "; or " + CFG_CLASH + "."),
             ("RPMA_E_PROVIDER", "{addr} and {port} cannot be resolved, an event descriptor "
              "cannot be made, {addr} is a wildcard address, the CQ size of {cfg} is 0, the "
              "peer's progress thread cannot be started, or the caller is " + FORK + "."),
             NOMEM, UNKNOWN],
     notes=PORT_NOTE,
     see=["rpma_conn_req_connect", "rpma_conn_req_delete", "rpma_conn_req_recv",
          "rpma_conn_cfg_new", "rpma_ep_next_conn_req"])

page("rpma_conn_req_connect", "connect, or accept an incoming connection request",
     """**rpma_conn_req_connect**() turns the connection request {*req_ptr} into a connection,
stored in {*conn_ptr}, and sends the private data {pdata} to the remote side.

For a request made with [[rpma_conn_req_new]] (a client), it starts connecting and returns at
once; {pdata} may hold at most 56 bytes. The outcome arrives as an event
([[rpma_conn_next_event]]): **RPMA_CONN_ESTABLISHED**, after which the server's private data can
be read with [[rpma_conn_get_private_data]], or **RPMA_CONN_REJECTED** or
**RPMA_CONN_UNREACHABLE**. A refused or unreachable address is therefore an event, not an error
of this call.

For a request from [[rpma_ep_next_conn_req]] (a server), it accepts the request; {pdata} may
hold at most 196 bytes. The connection's **RPMA_CONN_ESTABLISHED** event is queued before the
call returns. A request whose client has given up on it since it was taken (deleted its
connection, or ended) is not accepted: the call fails with **RPMA_E_PROVIDER**, as
**rdma_accept**(3) does. A client that gives up later leaves a connection that gets
**RPMA_CONN_CLOSED**.

{pdata} may be NULL, for no private data; otherwise its {ptr} must not be NULL nor its {len} 0.
The bytes are copied. The remote side gets them as RDMA delivers private data: padded with zeros
to 56 bytes (connect) or 196 bytes (accept), and all zeros when {pdata} is NULL.

The request is consumed whatever happens: {*req_ptr} is set to NULL and the request freed, even
when the call fails (an incoming request is then rejected). In a forked child (below) the
request is left to the parent, neither accepted nor rejected, and {*req_ptr} is still set to
NULL.""",
     ret=RET_0,
     errors=[("RPMA_E_INVAL", "{req_ptr}, {*req_ptr} or {conn_ptr} is NULL; {pdata} is given "
              "with a NULL {ptr} or a {len} of 0."),
             ("RPMA_E_PROVIDER", "{pdata} is longer than 56 bytes (connect) or 196 bytes "
              "(accept), which RDMA refuses to send (an incoming request is then rejected); a "
              "socket cannot be made or handed to the progress thread; the client of an incoming "
              "request has given up on it; or the caller is " + FORK + "."),
             NOMEM, UNKNOWN],
     see=["rpma_conn_req_new", "rpma_ep_next_conn_req", "rpma_conn_next_event",
          "rpma_conn_get_private_data", "rpma_conn_delete"],
     extra=["struct rpma_conn_private_data"])

page("rpma_conn_req_delete", "delete a connection request",
     """**rpma_conn_req_delete**() deletes the connection request {*req_ptr} and sets
{*req_ptr} to NULL. An incoming request ([[rpma_ep_next_conn_req]]) is rejected: the client gets
**RPMA_CONN_REJECTED**. With {*req_ptr} NULL it does nothing and returns 0.""",
     errors=[inval_null("req_ptr"),
             ("RPMA_E_PROVIDER", "The caller is " + FORK + "; the request is left to the "
              "parent, neither rejected nor freed, and {*req_ptr} is set to NULL, as on any "
              "failure.")],
     see=["rpma_conn_req_new", "rpma_ep_next_conn_req", "rpma_conn_req_connect"])

page("rpma_conn_req_get_private_data", "get the private data of an incoming request",
     """**rpma_conn_req_get_private_data**() fills {*pdata} with the address and length of the
private data the client sent with the incoming request {req}, as the RDMA connection manager
delivers it: 56 bytes, the client's bytes first and zeros after them. {ptr} is not NULL even when
the client passed no private data; a protocol that needs the length sends it in the data. For a
request made with [[rpma_conn_req_new]], {ptr} is NULL and {len} 0. The bytes belong to the
request; after [[rpma_conn_req_connect]] the connection holds them, at the same address, until
it is deleted ([[rpma_conn_get_private_data]]).""",
     ret=ret_out("*pdata"),
     errors=[inval_null("req", "pdata")],
     notes=PDATA_NOTE,
     see=["rpma_ep_next_conn_req", "rpma_conn_get_private_data", "rpma_conn_req_connect"],
     extra=["struct rpma_conn_private_data"])

page("rpma_ep_listen", "listen for incoming connections",
     """**rpma_ep_listen**() creates an endpoint that listens on {addr} and {port} for the peer
{peer}, and stores it in {*ep_ptr}. Both are resolved with [[getaddrinfo(3)]] for a passive
socket; the endpoint listens on the first address that can be bound. {addr} may be a host name or
a numeric IPv4 or IPv6 address, including a wildcard such as 0.0.0.0; {port} a port number
(plain decimal digits, at most 65535) or a service name.

Incoming requests are taken with [[rpma_ep_next_conn_req]]; [[rpma_ep_get_fd]] gives a
descriptor to wait on. The first endpoint or request of a peer starts the peer's progress thread,
which answers the handshake of each client: a client must send its request within 5 seconds, and
at most 4096 may be half open at once.""",
     ret=ret_out("*ep_ptr"),
     errors=[("RPMA_E_INVAL", "{peer}, {addr}, {port} or {ep_ptr} is NULL, or " + PORT_BAD
              + "."),
             ("RPMA_E_PROVIDER", "{addr} and {port} cannot be resolved, no address can be bound "
              "or listened on (for example the port is taken or the address is not local), an "
              "event descriptor cannot be made, the peer's progress thread cannot be started, "
              "or the caller is " + FORK + "."),
             NOMEM, UNKNOWN],
     notes=PORT_NOTE,
     see=["rpma_ep_shutdown", "rpma_ep_get_fd", "rpma_ep_next_conn_req", "rpma_peer_new"])

page("rpma_ep_shutdown", "stop listening and delete an endpoint",
     """**rpma_ep_shutdown**() closes the listening socket of the endpoint {*ep_ptr}, deletes the
endpoint and sets {*ep_ptr} to NULL. Requests not yet taken with [[rpma_ep_next_conn_req]] are
dropped; their clients get **RPMA_CONN_REJECTED**. Requests already taken and connections made
from them are not affected. With {*ep_ptr} NULL it does nothing and returns 0.""",
     errors=[inval_null("ep_ptr"),
             ("RPMA_E_PROVIDER", "The caller is " + FORK + "; the endpoint and {*ep_ptr} are "
              "left as they were.")],
     see=["rpma_ep_listen"])

page("rpma_ep_get_fd", "get the file descriptor of an endpoint",
     """**rpma_ep_get_fd**() stores in {*fd} a file descriptor that is readable while the
endpoint {ep} has an incoming request waiting for [[rpma_ep_next_conn_req]]. It belongs to the
endpoint: do not close it; it is valid until [[rpma_ep_shutdown]]. It is blocking; after setting
**O_NONBLOCK** on it with [[fcntl(2)]], [[rpma_ep_next_conn_req]] returns **RPMA_E_NO_EVENT**
instead of blocking. Change the mode while no other thread is inside [[rpma_ep_next_conn_req]],
for the reason [[rpma_conn_get_event_fd]] gives.""",
     ret=ret_out("*fd"),
     errors=[inval_null("ep", "fd")],
     see=["rpma_ep_next_conn_req", "rpma_ep_listen"])

page("rpma_ep_next_conn_req", "take the next incoming connection request",
     """**rpma_ep_next_conn_req**() takes the oldest incoming request of the endpoint {ep} and
stores it in {*req_ptr}. With none waiting it blocks, unless the endpoint's descriptor
([[rpma_ep_get_fd]]) was made non-blocking. The connection's CQs and queues are made now, per
{cfg} (NULL means the defaults of [[rpma_conn_cfg_new]]); if that fails (a CQ size of 0, a
configuration that clashes as described under ERRORS) the request is rejected: the client gets
**RPMA_CONN_REJECTED**.

The client's private data can be read with [[rpma_conn_req_get_private_data]]. Accept the
request with [[rpma_conn_req_connect]] or reject it with [[rpma_conn_req_delete]].

Over tcp and shm a request whose client has given up on it already (deleted its connection, or
ended) is dropped, not handed out; if no other request is waiting, the call returns
**RPMA_E_NO_EVENT**, even on a blocking descriptor, so that a program woken by the descriptor
never blocks here. The verbs provider hands it out, as upstream does, and accepting it then fails
(**rdma_accept**(3)); any failure to read the connection manager's event is **RPMA_E_NO_EVENT**
there.""",
     ret=ret_out("*req_ptr"),
     errors=[("RPMA_E_INVAL", "{ep} or {req_ptr} is NULL, or " + CFG_CLASH + "."),
             ("RPMA_E_NO_EVENT", "The descriptor is non-blocking and no request is waiting; "
              "over tcp and shm, the only request waiting came from a client that has given up "
              "on it; over verbs, the only event waiting was not a request (it is skipped and "
              "logged), even on a blocking descriptor."),
             ("RPMA_E_PROVIDER", "An event descriptor cannot be made, the connection's CQ "
              "cannot (a CQ size of 0: the request is rejected), or the caller is " + FORK + "."),
             NOMEM, UNKNOWN],
     notes="""Upstream librpma returns **RPMA_E_PROVIDER**, not **RPMA_E_NO_EVENT**, on a
non-blocking descriptor with no request waiting (**rdma_get_cm_event**(3) fails with
**EAGAIN**), and so does its [[rpma_conn_next_event]]. A program meant for both takes one request
per readiness of the descriptor, which [[epoll(7)]] reports level-triggered. For a request whose
client has given up, upstream librpma also fails, with **RPMA_E_PROVIDER**.""",
     see=["rpma_ep_listen", "rpma_ep_get_fd", "rpma_conn_req_connect", "rpma_conn_req_delete",
          "rpma_conn_req_get_private_data", "rpma_conn_req_recv"])

# =============================================================================================
# connection configuration

page("rpma_conn_cfg_new", "create a connection configuration",
     """**rpma_conn_cfg_new**() creates a connection configuration with the default values and
stores it in {*cfg_ptr}:

- connection set-up timeout **RPMA_DEFAULT_TIMEOUT_MS** (1000 ms);
- CQ, SQ and RQ sizes 10;
- RCQ size 0: no separate receive CQ;
- no shared completion channel;
- no shared receive queue.

[[rpma_conn_req_new]] and [[rpma_ep_next_conn_req]] read a configuration when they are called,
so changing or deleting it later does not affect requests and connections made before; given
NULL, they use the defaults above.""",
     ret=ret_out("*cfg_ptr"),
     errors=[inval_null("cfg_ptr"), NOMEM],
     see=["rpma_conn_cfg_delete", "rpma_conn_cfg_set_timeout", "rpma_conn_cfg_set_cq_size",
          "rpma_conn_cfg_set_rcq_size", "rpma_conn_cfg_set_sq_size",
          "rpma_conn_cfg_set_rq_size", "rpma_conn_cfg_set_compl_channel",
          "rpma_conn_cfg_set_srq", "rpma_conn_req_new", "rpma_ep_next_conn_req"],
     extra=["#define RPMA_DEFAULT_TIMEOUT_MS"])

page("rpma_conn_cfg_delete", "delete a connection configuration",
     """**rpma_conn_cfg_delete**() deletes the connection configuration {*cfg_ptr} and sets
{*cfg_ptr} to NULL. With {*cfg_ptr} NULL it does nothing and returns 0. Requests and connections
made with the configuration are not affected.""",
     errors=[inval_null("cfg_ptr")],
     see=["rpma_conn_cfg_new"])

cfg_pair("conn", "timeout", "int", "connection set-up timeout",
         """**rpma_conn_cfg_set_timeout**() sets, in milliseconds, how long a client's
[[rpma_conn_req_connect]] gives the TCP set-up of the connection (both of its streams) before it
ends with **RPMA_CONN_UNREACHABLE**. Once connected, the client waits up to 30 more seconds for
the server's answer; that limit is fixed. The server side does not use the timeout. The default
is **RPMA_DEFAULT_TIMEOUT_MS** (1000).""",
         set_errors=[("RPMA_E_INVAL", "{cfg} is NULL or {timeout_ms} is negative; the old value "
                      "is kept.")],
         arg="timeout_ms", see=["rpma_conn_next_event"])

cfg_pair("conn", "cq_size", "uint32_t", "CQ size",
         """**rpma_conn_cfg_set_cq_size**() sets the size of the main completion queue of the
connections made with {cfg}. The default is 10. A size of 0 makes [[rpma_conn_req_new]] and
[[rpma_ep_next_conn_req]] fail with **RPMA_E_PROVIDER**, as **ibv_create_cq**(3) refuses it.""",
         notes="""Over tcp and shm completion queues grow as needed and never overrun, so any
other size is kept and reported but limits nothing. The verbs provider, as upstream librpma,
sizes the verbs CQ with it, and a CQ that overflows there breaks the connection.""",
         see=["rpma_conn_get_cq"])

cfg_pair("conn", "rcq_size", "uint32_t", "receive CQ size",
         """**rpma_conn_cfg_set_rcq_size**() sets the size of the receive completion queue (RCQ)
of the connections made with {cfg}. 0, the default, means no RCQ: receive completions go to the
main CQ. Any other value gives each connection an RCQ, where its receive completions go (unless
a shared receive queue with a CQ of its own takes them, see [[rpma_conn_cfg_set_srq]]: the
connection then has no RCQ). As with the CQ, tcp and shm do not bound the RCQ by this size;
the verbs provider does.""",
         see=["rpma_conn_get_rcq", "rpma_conn_cfg_set_compl_channel"])

cfg_pair("conn", "sq_size", "uint32_t", "send queue size",
         """**rpma_conn_cfg_set_sq_size**() sets how many operations ([[rpma_read]],
[[rpma_write]], [[rpma_flush]], [[rpma_send]] and the others; receives are not counted) may be
outstanding at once on the connections made with {cfg}. An operation holds its slot from its
post until it completes; one posted without a completion holds it until a later operation with a
completion completes. A post that finds every slot taken fails with **RPMA_E_PROVIDER**. The
default is 10.""",
         see=["rpma_write"])

cfg_pair("conn", "rq_size", "uint32_t", "receive queue size",
         """**rpma_conn_cfg_set_rq_size**() sets how many receives ([[rpma_recv]],
[[rpma_conn_req_recv]]) may be posted and not yet taken at once on the connections made with
{cfg}. One more fails with **RPMA_E_PROVIDER**. The default is 10. A connection that takes its
receives from a shared receive queue does not use it.""",
         see=["rpma_recv"])

cfg_pair("conn", "compl_channel", "bool", "shared completion channel setting",
         """**rpma_conn_cfg_set_compl_channel**() sets whether the main CQ and the RCQ of the
connections made with {cfg} share one completion channel, that is one file descriptor to wait
on. The default is false. With a shared channel:

- [[rpma_conn_wait]] waits on both CQs and tells which one fired;
- [[rpma_conn_get_compl_fd]] gives the descriptor, and [[rpma_cq_get_fd]] gives it for both CQs;
- [[rpma_cq_wait]] on either CQ fails with **RPMA_E_SHARED_CHANNEL**.

A shared channel cannot be combined with a shared receive queue that has its own CQ:
[[rpma_conn_req_new]] and [[rpma_ep_next_conn_req]] refuse such a configuration with
**RPMA_E_INVAL**.""",
         arg="shared", see=["rpma_conn_wait", "rpma_conn_get_compl_fd"])

cfg_pair("conn", "srq", "struct rpma_srq *", "shared receive queue",
         """**rpma_conn_cfg_set_srq**() sets the shared receive queue {srq} that the connections
made with {cfg} take their receives from; NULL, the default, means each connection has its own
receive queue. The configuration keeps only the pointer.

A connection with a shared receive queue has no receive queue of its own: receives are posted
with [[rpma_srq_recv]], and [[rpma_recv]] and [[rpma_conn_req_recv]] fail. Its receive
completions go to the shared queue's CQ if it has one ([[rpma_srq_get_rcq]]), otherwise to the
connection's RCQ, otherwise to its main CQ. The shared receive queue must outlive the requests
and connections made with it; [[rpma_srq_delete]] fails while any exist.""",
         get_desc="""**rpma_conn_cfg_get_srq**() stores in {*srq_ptr} the shared receive queue
set in {cfg} with [[rpma_conn_cfg_set_srq]], or NULL.""",
         ptr="srq_ptr", see=["rpma_srq_new", "rpma_srq_recv"])

# =============================================================================================
# shared receive queues

page("rpma_srq_cfg_new", "create a shared receive queue configuration",
     """**rpma_srq_cfg_new**() creates a configuration for [[rpma_srq_new]] with the default
values and stores it in {*cfg_ptr}: RQ size 100 and RCQ size 100. [[rpma_srq_new]] reads it when
called; given NULL it uses these defaults.""",
     ret=ret_out("*cfg_ptr"),
     errors=[inval_null("cfg_ptr"), NOMEM],
     see=["rpma_srq_cfg_delete", "rpma_srq_cfg_set_rq_size", "rpma_srq_cfg_set_rcq_size",
          "rpma_srq_new"])

page("rpma_srq_cfg_delete", "delete a shared receive queue configuration",
     """**rpma_srq_cfg_delete**() deletes the configuration {*cfg_ptr} and sets {*cfg_ptr} to
NULL. With {*cfg_ptr} NULL it does nothing and returns 0.""",
     errors=[inval_null("cfg_ptr")],
     see=["rpma_srq_cfg_new"])

cfg_pair("srq", "rq_size", "uint32_t", "receive queue size",
         """**rpma_srq_cfg_set_rq_size**() sets how many receives may be posted with
[[rpma_srq_recv]] and not yet taken at once on a shared receive queue made with {cfg}. One more
fails with **RPMA_E_PROVIDER**. The default is 100.""",
         see=["rpma_srq_recv"])

cfg_pair("srq", "rcq_size", "uint32_t", "receive CQ size",
         """**rpma_srq_cfg_set_rcq_size**() sets the size of the receive completion queue of a
shared receive queue made with {cfg}. 0 means it has none: the receive completions go to the CQs
of the connections that take the messages. Any other value gives it a CQ of its own, where all
its receive completions go. The default is 100. tcp and shm do not bound the CQ by this size;
the verbs provider does.""",
         see=["rpma_srq_get_rcq"])

page("rpma_srq_new", "create a shared receive queue",
     """**rpma_srq_new**() creates a shared receive queue on the peer {peer}, per {cfg} (NULL
means the defaults of [[rpma_srq_cfg_new]]), and stores it in {*srq_ptr}. Receives posted to it
with [[rpma_srq_recv]] serve every connection made with a configuration that names it
([[rpma_conn_cfg_set_srq]]); a completion's {qp_num} ([[rpma_conn_get_qp_num]]) tells which
connection the message came through.""",
     ret=ret_out("*srq_ptr"),
     errors=[inval_null("peer", "srq_ptr"),
             ("RPMA_E_PROVIDER", "The receive queue size of {cfg} is 0 (as **ibv_create_srq**(3) "
              "refuses it), or the completion channel's descriptor cannot be made."),
             NOMEM, UNKNOWN],
     see=["rpma_srq_delete", "rpma_srq_recv", "rpma_srq_get_rcq", "rpma_conn_cfg_set_srq",
          "rpma_srq_cfg_new"])

page("rpma_srq_delete", "delete a shared receive queue",
     """**rpma_srq_delete**() deletes the shared receive queue {*srq_ptr}, with its CQ, and sets
{*srq_ptr} to NULL. With {*srq_ptr} NULL it does nothing and returns 0. It fails while a
connection, or a connection request made with it in its configuration, still uses it; the queue
then stays usable.""",
     errors=[inval_null("srq_ptr"),
             ("RPMA_E_PROVIDER", "A connection or connection request still uses the queue; "
              "{*srq_ptr} is left as it was.")],
     notes="""Upstream librpma sets {*srq_ptr} to NULL even when it fails. rpma keeps it, as
**ibv_destroy_srq**(3) fails with **EBUSY** and keeps the queue, so that the application can
delete it once its connections are gone.""",
     see=["rpma_srq_new", "rpma_conn_delete"])

page("rpma_srq_recv", "post a receive buffer on a shared receive queue",
     """**rpma_srq_recv**() posts a receive of at most {len} bytes into offset {offset} of the
local region {dst} on the shared receive queue {srq}. Any connection that uses the queue may take
it. A receive of 0 bytes names no region: {dst} is NULL and {offset} and {len} are 0. Its
completion goes to the queue's CQ if it has one, otherwise to the receiving connection's RCQ,
otherwise to its main CQ; its {qp_num} is the receiving connection's queue pair number.

""" + RECV_COMMON,
     errors=[("RPMA_E_INVAL", "{srq} is NULL, {dst} is NULL while {offset} or {len} is not 0, "
              "the range does not fit in {dst}, or {len} is over the limit below."),
             ("RPMA_E_PROVIDER", "The queue is full ([[rpma_srq_cfg_set_rq_size]]), or the "
              "caller is " + FORK + "."),
             NOMEM, UNKNOWN],
     see=["rpma_srq_new", "rpma_recv", "rpma_cq_get_wc"])

page("rpma_srq_get_rcq", "get the receive completion queue of a shared receive queue",
     """**rpma_srq_get_rcq**() stores in {*rcq_ptr} the receive completion queue of the shared
receive queue {srq}, or NULL when its RCQ size ([[rpma_srq_cfg_set_rcq_size]]) was 0. The CQ
belongs to the queue and is freed by [[rpma_srq_delete]].""",
     ret=ret_out("*rcq_ptr"),
     errors=[inval_null("srq", "rcq_ptr")],
     see=["rpma_srq_new", "rpma_cq_wait", "rpma_cq_get_wc"])

# =============================================================================================
# memory regions

page("rpma_mr_reg", "register a memory region",
     """**rpma_mr_reg**() registers {size} bytes at {ptr} with the peer {peer} for the uses in
{usage}, and stores the new local region in {*mr_ptr}. {usage} is a bitwise OR of:

= **RPMA_MR_USAGE_READ_SRC**
the remote side may read the region ([[rpma_read]]);
= **RPMA_MR_USAGE_READ_DST**
it is the local destination of reads;
= **RPMA_MR_USAGE_WRITE_SRC**
it is the local source of writes ([[rpma_write]], [[rpma_write_with_imm]]);
= **RPMA_MR_USAGE_WRITE_DST**
the remote side may write it ([[rpma_write]], [[rpma_atomic_write]]);
= **RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY**, **RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT**
the remote side may flush it with that type ([[rpma_flush]]);
= **RPMA_MR_USAGE_SEND**
it is the source of messages ([[rpma_send]]);
= **RPMA_MR_USAGE_RECV**
it is the destination of receives ([[rpma_recv]], [[rpma_srq_recv]]).

**RPMA_MR_USAGE_READ_DST**, **RPMA_MR_USAGE_WRITE_SRC**, **RPMA_MR_USAGE_WRITE_DST** and
**RPMA_MR_USAGE_RECV** allow local writes (librpma registers them with
**IBV_ACCESS_LOCAL_WRITE**): a region with any of them can be the destination of reads and
receives. As a NIC reads any region of its protection domain, any region of the peer can be the
source of writes and sends.

The remote side gets the access a NIC grants for the flags librpma registers with:
**RPMA_MR_USAGE_READ_SRC** and both flush usages give remote reads (a flush is carried out as a
read), so a region registered for a flush alone can also be read with [[rpma_read]] and flushed
with either type; which flush type a peer may ask for is checked on its side, from the region's
descriptor ([[rpma_mr_remote_get_flush_type]]). **RPMA_MR_USAGE_WRITE_DST** gives remote writes.

The region gets a random, non-zero rkey, unique among the peer's regions. Its descriptor
([[rpma_mr_get_descriptor]]) lets the remote side address it.

The memory is checked as **ibv_reg_mr**(3) checks it when pinning the pages: every byte must be
mapped, and writable if {usage} has **RPMA_MR_USAGE_READ_DST**, **RPMA_MR_USAGE_WRITE_SRC**,
**RPMA_MR_USAGE_WRITE_DST** or **RPMA_MR_USAGE_RECV** (the usages librpma registers with local or
remote write access), readable otherwise. Read-only memory can be registered for
**RPMA_MR_USAGE_READ_SRC**, **RPMA_MR_USAGE_SEND** and the flush usages, and memory mapped with
**PROT_WRITE** alone for any usage that includes one of those four. The check is made once: memory
unmapped while still registered is the application's error.""",
     ret=ret_out("*mr_ptr"),
     errors=[("RPMA_E_INVAL", "{peer}, {ptr} or {mr_ptr} is NULL, {size} is 0, or {usage} is 0 "
              "or has bits other than the usage values above."),
             ("RPMA_E_PROVIDER", "Part of the memory is not mapped, or not writable (readable) "
              "when {usage} does (does not) allow writes; the library logs the first bad "
              "address."),
             NOMEM, UNKNOWN],
     notes="""The memory check is rpma's: upstream librpma gets **RPMA_E_PROVIDER** from
**ibv_reg_mr**(3) failing with **EFAULT** in the same cases. rpma neither pins nor locks the
pages. Over tcp and shm a forked child may register and deregister memory, on a peer inherited
from its parent too; the verbs provider refuses it (**RPMA_E_PROVIDER**), as the child's verbs
objects are its parent's. There **ibv_reg_mr**(3) failing gives **RPMA_E_PROVIDER**, or
**RPMA_E_NOMEM** for **ENOMEM**.""",
     see=["rpma_mr_dereg", "rpma_mr_get_descriptor", "rpma_mr_advise", "rpma_peer_new"])

page("rpma_mr_dereg", "deregister a memory region",
     """**rpma_mr_dereg**() deregisters the local region {*mr_ptr} and sets {*mr_ptr} to NULL.
With {*mr_ptr} NULL it does nothing and returns 0.

When it returns, the library will never read or write that memory again. If the library is using
the region at that moment (one copy, or one non-blocking system call) the call waits for that to
end. Afterwards:

- remote operations naming the region fail their access check (**IBV_WC_REM_ACCESS_ERR** at the
remote side); a remote write whose data was not all placed is answered with that error, never
with success;
- a queued local operation whose source or destination it was completes with
**IBV_WC_LOC_PROT_ERR**, and its queue pair enters the error state; a message already half
sent ends the connection instead (**RPMA_CONN_LOST**);
- a receive posted into it completes with **IBV_WC_LOC_PROT_ERR** when a message arrives.""",
     errors=[inval_null("mr_ptr")],
     notes="""Upstream librpma returns **RPMA_E_PROVIDER** when **ibv_dereg_mr**(3) fails; rpma
never does. Deregistering is allowed in a forked child.""",
     see=["rpma_mr_reg"])

page("rpma_mr_get_descriptor", "serialise a memory region for the remote side",
     """**rpma_mr_get_descriptor**() writes the descriptor of the local region {mr} to {desc},
which must have room for [[rpma_mr_get_descriptor_size]] bytes (21). The remote side turns it
into a remote region with [[rpma_mr_remote_from_descriptor]]; how it gets there is up to the
application, for example in the private data of the connection set-up.

The layout, little-endian whatever the host: the address (8 bytes), the size (8 bytes), the rkey
(4 bytes) and the usage bits of [[rpma_mr_reg]] (1 byte).""",
     errors=[inval_null("mr", "desc")],
     see=["rpma_mr_get_descriptor_size", "rpma_mr_remote_from_descriptor",
          "rpma_conn_req_connect"])

page("rpma_mr_get_descriptor_size", "get the size of a memory region's descriptor",
     """**rpma_mr_get_descriptor_size**() stores in {*desc_size} the size of the descriptor
[[rpma_mr_get_descriptor]] writes for {mr}: always 21 bytes.""",
     ret=ret_out("*desc_size"),
     errors=[inval_null("mr", "desc_size")],
     see=["rpma_mr_get_descriptor", "rpma_mr_remote_from_descriptor"])

page("rpma_mr_get_ptr", "get the address of a local memory region",
     """**rpma_mr_get_ptr**() stores in {*ptr} the address the local region {mr} was registered
at ([[rpma_mr_reg]]).""",
     ret=ret_out("*ptr"),
     errors=[inval_null("mr", "ptr")],
     see=["rpma_mr_get_size", "rpma_mr_reg"])

page("rpma_mr_get_size", "get the size of a local memory region",
     """**rpma_mr_get_size**() stores in {*size} the size in bytes of the local region {mr}, as
registered ([[rpma_mr_reg]]).""",
     ret=ret_out("*size"),
     errors=[inval_null("mr", "size")],
     see=["rpma_mr_get_ptr", "rpma_mr_reg"])

page("rpma_mr_advise", "tell the library how a memory region will be used",
     """**rpma_mr_advise**() gives advice about {len} bytes at offset {offset} of the local region
{mr}, with the values of **ibv_advise_mr**(3):

= **IBV_ADVISE_MR_ADVICE_PREFETCH**
the range will be read: its pages are faulted in ahead (**MADV_WILLNEED**, see [[madvise(2)]]);
= **IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE**
the range will be written: the same, for a region registered with **RPMA_MR_USAGE_READ_DST**,
**RPMA_MR_USAGE_WRITE_DST** or **RPMA_MR_USAGE_RECV**;
= **IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT**
accepted; it does nothing.

{flags} is 0 or **IBV_ADVISE_MR_FLAG_FLUSH**, which makes no difference here: the call always
finishes its work before it returns. A {len} of 0 only checks the arguments.""",
     errors=[("RPMA_E_INVAL", "{mr} is NULL, the range does not fit in the region, {flags} has "
              "other bits than **IBV_ADVISE_MR_FLAG_FLUSH**, or the advice is "
              "**IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE** for a region never written."),
             ("RPMA_E_NOSUPP", "{advice} is not one of the three values above, or, verbs "
              "provider, the device does not take it (**ibv_advise_mr**(3) fails with "
              "**EOPNOTSUPP**, as without on-demand paging)."),
             ("RPMA_E_PROVIDER", "[[madvise(2)]] failed; or, verbs provider, "
              "**ibv_advise_mr**(3) failed otherwise, or the caller is " + FORK + ".")],
     notes="""The description is that of tcp and shm, which touch memory only from the CPU and
need no paging help; prefetching only saves page faults during the first transfers. The verbs
provider passes all three advice values to **ibv_advise_mr**(3), as upstream librpma does (for
the NIC's on-demand paging); its **EINVAL** and **EFAULT** give **RPMA_E_INVAL**.""",
     see=["rpma_mr_reg", "rpma_utils_ibv_context_is_odp_capable"])

page("rpma_mr_remote_from_descriptor", "create a remote memory region from its descriptor",
     """**rpma_mr_remote_from_descriptor**() decodes the descriptor of a remote region, {desc_size}
bytes at {desc} written by [[rpma_mr_get_descriptor]] on the remote side, and stores the new
remote region in {*mr_ptr}. Bytes past the first 21 are ignored. Delete it with
[[rpma_mr_remote_delete]].

The remote region names memory of the remote peer for [[rpma_read]], [[rpma_write]],
[[rpma_atomic_write]] and [[rpma_flush]]. Nothing is checked with the remote side here: its
rkey, range and usage are checked there when an operation executes.""",
     ret=ret_out("*mr_ptr"),
     errors=[("RPMA_E_INVAL", "{desc} or {mr_ptr} is NULL, {desc_size} is less than 21, or the "
              "descriptor's usage is 0."),
             ("RPMA_E_NOSUPP", "The descriptor describes no valid region: its size is 0 or it "
              "runs past the end of the address space."),
             NOMEM],
     see=["rpma_mr_get_descriptor", "rpma_mr_remote_delete", "rpma_mr_remote_get_size",
          "rpma_mr_remote_get_flush_type"])

page("rpma_mr_remote_get_size", "get the size of a remote memory region",
     """**rpma_mr_remote_get_size**() stores in {*size} the size in bytes of the remote region
{mr}, as its descriptor gave it.""",
     ret=ret_out("*size"),
     errors=[inval_null("mr", "size")],
     see=["rpma_mr_remote_from_descriptor"])

page("rpma_mr_remote_get_flush_type", "get the flush types a remote memory region allows",
     """**rpma_mr_remote_get_flush_type**() stores in {*flush_type} the flush usages the remote
region {mr} was registered with: a bitwise OR of **RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY** and
**RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT**, or 0. [[rpma_flush]] refuses a flush type the region
does not allow.""",
     ret=ret_out("*flush_type"),
     errors=[inval_null("mr", "flush_type")],
     see=["rpma_flush", "rpma_mr_remote_from_descriptor", "rpma_mr_reg"])

page("rpma_mr_remote_delete", "delete a remote memory region",
     """**rpma_mr_remote_delete**() deletes the remote region {*mr_ptr} and sets {*mr_ptr} to
NULL. With {*mr_ptr} NULL it does nothing and returns 0. Operations already posted with it are
not affected; the remote memory itself is not touched.""",
     errors=[inval_null("mr_ptr")],
     see=["rpma_mr_remote_from_descriptor"])

# =============================================================================================
# peers and their configuration

page("rpma_peer_new", "create a peer on a device",
     """**rpma_peer_new**() creates a peer on the device {ibv_ctx}, which must come from
[[rpma_utils_get_ibv_context]], and stores it in {*peer_ptr}. A peer is the protection domain:
memory registered on it can be reached through the connections made from it, and through no
others.

Creating a peer starts no thread. The peer's progress thread, which serves the remote side's
operations while the application sleeps, starts with its first endpoint or connection request.""",
     ret=ret_out("*peer_ptr"),
     errors=[inval_null("ibv_ctx", "peer_ptr"),
             ("RPMA_E_PROVIDER", "{ibv_ctx} did not come from [[rpma_utils_get_ibv_context]]."),
             NOMEM, UNKNOWN],
     see=["rpma_peer_delete", "rpma_utils_get_ibv_context", "rpma_mr_reg", "rpma_ep_listen",
          "rpma_conn_req_new"])

page("rpma_peer_delete", "delete a peer",
     """**rpma_peer_delete**() deletes the peer {*peer_ptr}, stopping its progress thread if it
has one, and sets {*peer_ptr} to NULL. With {*peer_ptr} NULL it does nothing and returns 0. It
fails while memory regions, endpoints, connection requests, connections or shared receive queues
still use the peer.""",
     errors=[inval_null("peer_ptr"),
             ("RPMA_E_PROVIDER", "Something still uses the peer (the library logs how many), "
              "or the caller is " + FORK + ". {*peer_ptr} is left as it was.")],
     notes="""Upstream librpma fails here when **ibv_dealloc_pd**(3) fails with **EBUSY**; rpma
counts the peer's users instead, with the same result.""",
     see=["rpma_peer_new"])

page("rpma_peer_cfg_new", "create a peer configuration",
     """**rpma_peer_cfg_new**() creates a peer configuration and stores it in {*pcfg_ptr}. It
describes what this side supports, for the remote side: today only whether data written here
reaches persistence ([[rpma_peer_cfg_set_direct_write_to_pmem]], default false). The remote side
gets it as a descriptor ([[rpma_peer_cfg_get_descriptor]], [[rpma_peer_cfg_from_descriptor]])
and applies it with [[rpma_conn_apply_remote_peer_cfg]].""",
     ret=ret_out("*pcfg_ptr"),
     errors=[inval_null("pcfg_ptr"), NOMEM],
     see=["rpma_peer_cfg_delete", "rpma_peer_cfg_set_direct_write_to_pmem",
          "rpma_peer_cfg_get_descriptor", "rpma_conn_apply_remote_peer_cfg"])

page("rpma_peer_cfg_delete", "delete a peer configuration",
     """**rpma_peer_cfg_delete**() deletes the peer configuration {*pcfg_ptr} and sets
{*pcfg_ptr} to NULL. With {*pcfg_ptr} NULL it does nothing and returns 0.""",
     errors=[inval_null("pcfg_ptr")],
     see=["rpma_peer_cfg_new"])

cfg_pair("peer", "direct_write_to_pmem", "bool", "direct write to persistent memory setting",
         """**rpma_peer_cfg_set_direct_write_to_pmem**() records in {pcfg} whether data written
into this side's regions reaches persistence when the remote side flushes it with
**RPMA_FLUSH_TYPE_PERSISTENT**: the memory is persistent memory mapped with DAX, or a file
mapping that [[msync(2)]] makes durable. The library does not check it; it is a statement the
application makes to the remote side. The default is false. The remote side's [[rpma_flush]]
refuses persistent flushes unless it has applied a configuration saying true
([[rpma_conn_apply_remote_peer_cfg]]).""",
         arg="supported", see=["rpma_conn_apply_remote_peer_cfg", "rpma_flush"])

page("rpma_peer_cfg_get_descriptor", "serialise a peer configuration for the remote side",
     """**rpma_peer_cfg_get_descriptor**() writes the descriptor of the peer configuration {pcfg}
to {desc}, which must have room for [[rpma_peer_cfg_get_descriptor_size]] bytes (1): 1 when
direct write to persistent memory is supported, else 0. The remote side rebuilds the
configuration with [[rpma_peer_cfg_from_descriptor]].""",
     errors=[inval_null("pcfg", "desc")],
     see=["rpma_peer_cfg_get_descriptor_size", "rpma_peer_cfg_from_descriptor"])

page("rpma_peer_cfg_get_descriptor_size", "get the size of a peer configuration's descriptor",
     """**rpma_peer_cfg_get_descriptor_size**() stores in {*desc_size} the size of the descriptor
[[rpma_peer_cfg_get_descriptor]] writes: always 1 byte.""",
     ret=ret_out("*desc_size"),
     errors=[inval_null("pcfg", "desc_size")],
     see=["rpma_peer_cfg_get_descriptor", "rpma_peer_cfg_from_descriptor"])

page("rpma_peer_cfg_from_descriptor", "create a peer configuration from its descriptor",
     """**rpma_peer_cfg_from_descriptor**() creates a peer configuration from the descriptor at
{desc}, {desc_size} bytes written by [[rpma_peer_cfg_get_descriptor]] on the remote side, and
stores it in {*pcfg_ptr}. A first byte other than 0 means direct write to persistent memory is
supported; further bytes are ignored. Apply it to a connection with
[[rpma_conn_apply_remote_peer_cfg]], then delete it with [[rpma_peer_cfg_delete]].""",
     ret=ret_out("*pcfg_ptr"),
     errors=[("RPMA_E_INVAL", "{desc} or {pcfg_ptr} is NULL, or {desc_size} is 0."), NOMEM],
     see=["rpma_peer_cfg_get_descriptor", "rpma_conn_apply_remote_peer_cfg"])

# =============================================================================================
# devices, strings, logging

page("rpma_utils_get_ibv_context", "find the device for an address",
     """**rpma_utils_get_ibv_context**() finds the device to use for {addr}, a host name or a
numeric IPv4 or IPv6 address, and stores its context in {*ibv_ctx_ptr}. With the tcp provider a
device is a local IP address:

= **RPMA_UTIL_IBV_CONTEXT_LOCAL**
{addr} itself, which must be an address of this host (it can be bound); use it to listen;
= **RPMA_UTIL_IBV_CONTEXT_REMOTE**
the local address the kernel routes from to reach {addr}; use it to connect.

The context belongs to the library and stays valid for the life of the process; the same address
gives the same context. From the tcp device it is a token for [[rpma_peer_new]], not a verbs
context: do not pass it to libibverbs; its {device->dev_name} reads **tcp:** followed by the
local address. From the verbs provider (an RDMA device serves {addr}; see **RPMA_PROVIDER** in
[[librpma]]) it is the connection manager's own verbs context, which libibverbs takes.""",
     ret=ret_out("*ibv_ctx_ptr"),
     errors=[("RPMA_E_INVAL", "{addr} or {ibv_ctx_ptr} is NULL, or {type} is neither value "
              "above."),
             ("RPMA_E_PROVIDER", "{addr} cannot be resolved, is not an address of this host "
              "(LOCAL), or cannot be routed to (REMOTE); or **RPMA_PROVIDER** names no provider, "
              "or one that cannot serve {addr}."),
             NOMEM, UNKNOWN],
     see=["rpma_peer_new", "rpma_utils_ibv_context_is_odp_capable"],
     extra=["enum rpma_util_ibv_context_type"])

page("rpma_utils_ibv_context_is_odp_capable", "tell whether a device supports on-demand paging",
     """**rpma_utils_ibv_context_is_odp_capable**() stores in {*is_odp_capable} whether the device
{ibv_ctx} supports on-demand paging. For the tcp provider's devices the answer is always 0: the
library touches memory only from the CPU, so there is nothing to page in on demand.""",
     ret=ret_out("*is_odp_capable"),
     errors=[inval_null("ibv_ctx", "is_odp_capable"),
             ("RPMA_E_PROVIDER", "{ibv_ctx} did not come from [[rpma_utils_get_ibv_context]].")],
     see=["rpma_utils_get_ibv_context", "rpma_mr_advise"])

page("rpma_utils_conn_event_2str", "describe a connection event",
     """**rpma_utils_conn_event_2str**() returns a short English description of the connection
event {conn_event}, including **RPMA_CONN_UNDEFINED**; a value outside the enumeration gets a
generic text.""",
     ret="""It returns a pointer to a constant string, never NULL. It cannot fail.""",
     see=["rpma_conn_next_event", "rpma_err_2str"],
     extra=["enum rpma_conn_event"])

page("rpma_err_2str", "describe an error code",
     """**rpma_err_2str**() returns a short English description of {ret}, an error code returned
by an rpma function: one for 0, one for each error code listed in [[librpma]], and a generic text
for any other value.""",
     ret="""It returns a pointer to a constant string, never NULL. It cannot fail.""",
     see=["rpma_utils_conn_event_2str"])

LEVELS = """= **RPMA_LOG_DISABLED** (-1)
nothing; for thresholds only;
= **RPMA_LOG_LEVEL_FATAL** (0)
the library cannot go on;
= **RPMA_LOG_LEVEL_ERROR** (1)
a call failed; the message says why;
= **RPMA_LOG_LEVEL_WARNING** (2)
something the application may want to handle;
= **RPMA_LOG_LEVEL_NOTICE** (3)
rare events, such as a connection attempt that failed;
= **RPMA_LOG_LEVEL_INFO** (4)
frequent events;
= **RPMA_LOG_LEVEL_DEBUG** (5)
details for debugging."""

THRESHOLDS = """= **RPMA_LOG_THRESHOLD**
the main threshold, default **RPMA_LOG_LEVEL_WARNING**: a message with a higher level is dropped
before any logging function sees it; **RPMA_LOG_DISABLED** silences the library;
= **RPMA_LOG_THRESHOLD_AUX**
default **RPMA_LOG_DISABLED**: read only by the default logging function, which also prints a
message on standard error when its level is at or below this threshold (and passed the main
one)."""

page("rpma_log_set_threshold", "set a logging threshold",
     """**rpma_log_set_threshold**() sets {threshold} to {level}. The thresholds:

""" + THRESHOLDS + """

The levels:

""" + LEVELS + """

The environment variables **RPMA_LOG_LEVEL** and **RPMA_LOG_LEVEL_AUX** set the two thresholds
when the library is loaded (see [[librpma]]); this call overrides them. Thresholds may be changed
from any thread at any time; of two concurrent calls the last one wins.""",
     errors=[("RPMA_E_INVAL", "{threshold} is neither **RPMA_LOG_THRESHOLD** nor "
              "**RPMA_LOG_THRESHOLD_AUX**, or {level} is outside -1 to 5; nothing changes.")],
     notes="""Upstream librpma may return **RPMA_E_AGAIN** when concurrent calls race; rpma's
thresholds are atomic and never do.""",
     see=["rpma_log_get_threshold", "rpma_log_set_function"],
     extra=["enum rpma_log_threshold", "enum rpma_log_level"])

page("rpma_log_get_threshold", "get a logging threshold",
     """**rpma_log_get_threshold**() stores in {*level} the current level of {threshold},
**RPMA_LOG_THRESHOLD** or **RPMA_LOG_THRESHOLD_AUX** (see [[rpma_log_set_threshold]]).""",
     ret=ret_out("*level"),
     errors=[("RPMA_E_INVAL", "{threshold} is neither **RPMA_LOG_THRESHOLD** nor "
              "**RPMA_LOG_THRESHOLD_AUX**, or {level} is NULL.")],
     see=["rpma_log_set_threshold", "rpma_log_set_function"],
     extra=["enum rpma_log_threshold", "enum rpma_log_level"])

page("rpma_log_set_function", "set the logging function",
     """**rpma_log_set_function**() makes {log_function} receive every message of the library
whose level passes the main threshold ([[rpma_log_set_threshold]]).
**RPMA_LOG_USE_DEFAULT_FUNCTION** (NULL) restores the default function.

The function gets the message's level, the source file, line and function that produced it, and
a [[printf(3)]] format with its arguments. The library formats the message first and always
calls {log_function}(level, file, line, function, "%s", message). It may be called from any
thread of the library, the peers' progress threads included, so it must be thread-safe. It
should not call rpma functions: it may be called while the library holds internal locks. When the
function is replaced while other threads log, each message goes whole to either the old or the
new function.

The default function writes every message to [[syslog(3)]], with a priority that follows the
level (**LOG_CRIT** for FATAL down to **LOG_DEBUG**), and also writes it as one line on standard
error, with the time, thread id, level and source location, when its level is at or below
**RPMA_LOG_THRESHOLD_AUX**. It does not call [[openlog(3)]].""",
     ret="""It always returns 0.""",
     notes="""Upstream librpma may return **RPMA_E_AGAIN** when concurrent calls race; in rpma
the swap is atomic and the call cannot fail.""",
     see=["rpma_log_set_threshold", "rpma_log_get_threshold"],
     extra=["typedef rpma_log_function", "#define RPMA_LOG_USE_DEFAULT_FUNCTION"])
