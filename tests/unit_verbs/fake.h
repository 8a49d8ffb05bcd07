// The fake rdma-core the verbs unit tests link against: every libibverbs and librdmacm entry
// point the verbs provider calls is wrapped at link time (-Wl,--wrap=SYMBOL, see
// tests/CMakeLists.txt), as upstream librpma's unit tests do, and the calls that rdma-core
// inlines through a context's ops (ibv_poll_cq, ibv_post_send, ibv_query_device_ex, ...) reach
// the ops of one fake verbs_context. Each call either succeeds with a fake object allocated on
// the heap or fails as a test scripted it; objects alive are counted per kind, so a test can
// check that an error path destroyed everything it created.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rpma::fake {

// Forgets every script, count and queued completion; the device attributes go back to their
// defaults (no ODP, 1 MiB max_msg_sz).
void reset();

// The nth call of fn from now (1: the next one) fails with err: a call that returns a pointer
// or -1 sets errno to err, one that returns an error number returns err (ibv_poll_cq: -err).
// fn is the rdma-core name ("rdma_bind_addr", "ibv_reg_mr" for both of its symbols, ...).
void fail(const char *fn, int err, int nth = 1);
// As err: the call fails and leaves errno 0 (a pointer-returning ibv_* call only).
constexpr int kNoErrno = -1;
// How often fn was called since reset().
int calls(const char *fn);
// How many of those calls were made with thread cancellation on (a cancellable read of an event
// could take it and be cancelled before acknowledging it).
int cancellable_calls(const char *fn);
// Called by every wrapper: counts the call and returns the error scripted for it, or 0.
int hit(const char *fn);

// Allocation bookkeeping, by kind ("pd", "mr", "cq", "cm_id", ...).
void born(const char *kind);
void died(const char *kind);
// "" when no fake object is alive, else "kind=N ..." for each kind with objects alive.
std::string alive();

// The fake device: its context is what the provider gets as rdma_cm's id->verbs.
ibv_context *context();
struct DeviceAttr {
    uint64_t odp_general = 0;  // odp_caps.general_caps
    uint32_t rc_odp = 0;       // odp_caps.per_transport_caps.rc_odp_caps
    uint32_t max_msg_sz = 1u << 20;
};
DeviceAttr &device_attr();

// The host's rdma_cm character device, as access(2) sees it (false after reset()).
void set_stack_present(bool present);
// rdma_bind_addr and rdma_resolve_addr leave id->verbs null (no device for the address).
void set_bind_no_device(bool on);

// Completions the next ibv_poll_cq calls hand out, in order.
void queue_wc(const ibv_wc &wc);
// A CQ whose channel fired (a unit on the channel's fd): the next ibv_get_cq_event returns it
// (EAGAIN when none).
void fire(ibv_cq *cq);
// Completion events acknowledged through ibv_ack_cq_events, summed.
unsigned acked_cq_events();

// Queues an rdma_cm event on ch for id (the fd becomes readable); private data is copied.
void deliver(rdma_event_channel *ch, rdma_cm_id *id, rdma_cm_event_type type,
             const std::vector<uint8_t> &pdata = {}, int status = 0);
// The event channel and the id rdma_create_event_channel and rdma_create_id made last.
rdma_event_channel *last_event_channel();
rdma_cm_id *last_cm_id();
// A new id, as rdma_cm makes for an incoming connection request (counted as an alive cm_id).
rdma_cm_id *incoming_id();

// The last arguments the fakes saw.
struct Seen {
    int reg_mr_access = 0;
    ibv_send_wr send_wr{};  // sg_list points at the poster's stack: read sge instead
    ibv_sge send_sge{};
    ibv_recv_wr recv_wr{};
    ibv_sge recv_sge{};
    ibv_qp_init_attr_ex qp_attr{};
    int advise = -1;
};
Seen &seen();

}  // namespace rpma::fake
