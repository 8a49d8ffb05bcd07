// The provider interface: everything src/core/ knows about a transport. A provider (tcp today)
// implements these classes; core holds them through this header only, and a provider includes
// nothing from core. Objects mirror verbs: a device opens a domain (the protection domain plus
// the progress engine), which registers memory and creates completion channels and queues,
// shared receive queues, listeners and queue pairs.
//
// Error codes are librpma's (RPMA_E_*). Unless a method says otherwise it may be called from any
// thread, and in a forked child every call on an object of the parent's domain fails with
// RPMA_E_PROVIDER (check_process) or does nothing.
#pragma once

#include <infiniband/verbs.h>
#include <librpma.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/fd_queue.h"

namespace rpma::prov {

// What a provider can carry; core checks the application's arguments against it.
struct Caps {
    uint32_t max_op_length;     // bytes one operation (and one message) moves at most
    uint8_t connect_pdata_max;  // private data bytes a connect carries
    uint8_t accept_pdata_max;   // private data bytes an accept carries
    // Queue pairs read their connection events themselves (QueuePair::event_fd): the core
    // makes no event queue for them, one descriptor less per connection.
    bool own_conn_events = false;
};

// A registered memory region. The address, size, usage and rkey are fixed at registration;
// the provider adds what its data path needs.
class MemoryRegion {
  public:
    virtual ~MemoryRegion() = default;
    char *addr() const noexcept { return addr_; }
    size_t size() const noexcept { return size_; }
    int usage() const noexcept { return usage_; }
    uint32_t rkey() const noexcept { return rkey_; }
    // The device's local key (verbs); 0, a key a device refuses, for the software providers.
    // A plain field: the post path reads it per request.
    uint32_t lkey() const noexcept { return lkey_; }

  protected:
    MemoryRegion(char *addr, size_t size, int usage, uint32_t rkey, uint32_t lkey = 0) noexcept
        : addr_(addr), size_(size), usage_(usage), rkey_(rkey), lkey_(lkey) {}

  private:
    char *addr_;
    size_t size_;
    int usage_;
    uint32_t rkey_;
    uint32_t lkey_;
};

enum class WrOp { kWrite, kWriteImm, kRead, kAtomicWrite, kFlush, kSend, kSendImm };

// A flush's len that asks for everything from its address to the region's end: what a longer
// flush becomes (rpma_flush takes a size_t).
constexpr uint32_t kFlushToEnd = UINT32_MAX;

// One work request for the send queue. The 8-byte fields come first: packed in 64 bytes, a
// post zeroes it in four stores (every post builds one).
struct SendWr {
    uint64_t wr_id = 0;
    char *local = nullptr;  // source, or destination of a read
    // The region local points into (the domain's), as the caller holds it: valid during
    // post_send only. A provider that keeps the region past the post copies the pointer it
    // finds here; one that needs only its key (verbs) takes no count, an atomic add per request.
    const std::shared_ptr<MemoryRegion> *local_region = nullptr;
    uint64_t raddr = 0;
    uint64_t value = 0;  // atomic write
    WrOp op = WrOp::kWrite;
    uint32_t len = 0;
    uint32_t rkey = 0;
    uint32_t imm = 0;
    bool signaled = true;
    // The local region may not be used this way (another peer's, or a read destination without
    // LOCAL_WRITE): the request completes with IBV_WC_LOC_PROT_ERR in its turn and touches no
    // memory, as a NIC checks an lkey.
    bool local_fault = false;
    bool persistent = false;  // flush: RPMA_FLUSH_TYPE_PERSISTENT
};
static_assert(sizeof(SendWr) == 64);

// One receive, posted to a queue pair or a shared receive queue.
struct RecvWr {
    std::shared_ptr<MemoryRegion> region;  // held: null for a 0-byte receive, or while borrowed
    char *ptr = nullptr;
    uint32_t len = 0;
    uint64_t wr_id = 0;
    // false: the region lacks LOCAL_WRITE (no READ_DST, WRITE_SRC, WRITE_DST or RECV usage) or
    // belongs to another peer; a message for it completes with IBV_WC_LOC_PROT_ERR and touches
    // nothing, as a NIC checks the lkey
    bool usable = true;
    // The region as the poster holds it, valid during the post only (SendWr::local_region): a
    // provider that keeps the receive calls hold() first; one that needs its key only (verbs)
    // reads mr() and takes no count.
    const std::shared_ptr<MemoryRegion> *borrowed = nullptr;

    MemoryRegion *mr() const noexcept { return borrowed ? borrowed->get() : region.get(); }
    void hold() {
        if (borrowed) region = *borrowed;
        borrowed = nullptr;
    }
};

class CompletionQueue;

// The fd an application waits on, and which CQ fired. One channel may serve a connection's CQ
// and RCQ (rpma_conn_cfg_set_compl_channel).
class CompletionChannel {
  public:
    virtual ~CompletionChannel() = default;
    virtual int fd() const noexcept = 0;
    // The CQ that fired, or nullptr if the fd is non-blocking and nothing is pending.
    virtual CompletionQueue *wait() = 0;
};

class CompletionQueue {
  public:
    virtual ~CompletionQueue() = default;
    virtual int fd() const noexcept = 0;  // its channel's
    // rpma_cq_get_wc: 0, or RPMA_E_NO_COMPLETION when empty.
    virtual int get_wc(int num_entries, ibv_wc *wc, int *got) = 0;
    // rpma_cq_wait: 0, RPMA_E_SHARED_CHANNEL if the channel is shared, RPMA_E_NO_COMPLETION if
    // the channel is non-blocking and nothing fired.
    virtual int wait() = 0;
    virtual void arm() noexcept = 0;  // the channel gets one event for the next completion
    virtual bool empty() = 0;
};

class SharedRecvQueue {
  public:
    virtual ~SharedRecvQueue() = default;
    // 0, or RPMA_E_PROVIDER when full (as ibv_post_srq_recv fails).
    virtual int post(RecvWr r) = 0;
};

struct QpAttr {
    uint32_t sq_size = 0;
    uint32_t rq_size = 0;
    int timeout_ms = RPMA_DEFAULT_TIMEOUT_MS;
    CompletionQueue *cq = nullptr;       // send-side completions
    CompletionQueue *recv_cq = nullptr;  // receive completions (the RCQ, the SRQ's, or cq)
    SharedRecvQueue *srq = nullptr;
    // Connection events go here; null where Caps::own_conn_events.
    FdQueue<rpma_conn_event> *events = nullptr;
};

// A connection request that arrived at a listener. Destroyed unaccepted, it is rejected.
class IncomingRequest {
  public:
    virtual ~IncomingRequest() = default;
    // The client's private data as RDMA CM delivers it: the bytes sent, then zeros up to what
    // a connect carries (Caps::connect_pdata_max).
    virtual const std::vector<uint8_t> &private_data() const noexcept = 0;
};

class QueuePair {
  public:
    virtual ~QueuePair() = default;
    virtual uint32_t qp_num() const noexcept = 0;
    // Client side: start connecting to the address given at creation; the outcome arrives as
    // an event. 0 or RPMA_E_PROVIDER.
    virtual int connect(const void *pdata, uint8_t pdata_len) = 0;
    // Server side: accept `req` (spent either way) with our private data. 0 or
    // RPMA_E_PROVIDER.
    virtual int accept(std::unique_ptr<IncomingRequest> req, const void *pdata,
                       uint8_t pdata_len) = 0;
    // 0, or RPMA_E_PROVIDER (a forked child; a full receive queue). A request that cannot
    // be carried out still returns 0 and completes with an error status in its turn.
    virtual int post_send(SendWr &&wr) = 0;
    virtual int post_recv(RecvWr &&r) = 0;
    virtual int disconnect() = 0;
    // Ends the queue pair (the peer sees CLOSED if it was established). Once it returns the
    // provider touches neither the CQs nor the event queue nor any receive buffer.
    virtual void close() = 0;
    // The peer's private data: the client's on the server, the server's on the client (set
    // before ESTABLISHED is queued), each delivered as IncomingRequest::private_data says (up to
    // Caps::accept_pdata_max on the client).
    virtual const std::vector<uint8_t> &remote_pdata() const noexcept = 0;

    // Where Caps::own_conn_events: the fd of the queue pair's own event source, read on the
    // caller's thread (verbs: rdma_cm's event channel, as upstream reads it), readable while an
    // event waits. Elsewhere -1: the events go to QpAttr::events.
    virtual int event_fd() const noexcept { return -1; }
    // Where Caps::own_conn_events: the next event; blocks unless event_fd() is non-blocking.
    // 0, RPMA_E_NO_EVENT or RPMA_E_PROVIDER.
    virtual int next_event(rpma_conn_event *) { return RPMA_E_NO_EVENT; }
};

class Listener {
  public:
    virtual ~Listener() = default;
    virtual int fd() const noexcept = 0;  // readable while requests wait
    // The next request; blocks for one unless fd() is non-blocking, and then nullptr if none
    // waits (RPMA_E_NO_EVENT for the caller).
    virtual std::unique_ptr<IncomingRequest> next() = 0;
    // Stops listening and rejects every request not taken yet. Not from a provider thread.
    virtual void close() = 0;
};

// The protection domain and its progress engine (one per rpma_peer).
class Domain {
  public:
    virtual ~Domain() = default;
    virtual const Caps &caps() const noexcept = 0;
    // 0 if this process may use the domain's endpoints, requests and connections; in a forked
    // child once the parent started the engine: RPMA_E_PROVIDER, logged with `what`.
    virtual int check_process(const char *what) const noexcept = 0;

    // Registers [addr, addr + size) under a fresh rkey. 0 or RPMA_E_NOMEM.
    virtual int register_memory(char *addr, size_t size, int usage,
                                std::shared_ptr<MemoryRegion> *out) = 0;
    // The rkey stops resolving, and the call returns once no access to the memory is in
    // progress; afterwards the provider never touches it.
    virtual void deregister(const std::shared_ptr<MemoryRegion> &mr) noexcept = 0;

    // rpma_mr_advise on [start, start + len) of mr, arguments already checked. 0,
    // RPMA_E_NOSUPP, RPMA_E_INVAL or RPMA_E_PROVIDER.
    virtual int advise(const MemoryRegion &mr, char *start, size_t len, int advice,
                       uint32_t flags) = 0;

    // RPMA_E_PROVIDER when out of descriptors.
    virtual int create_channel(std::unique_ptr<CompletionChannel> *out) = 0;
    // A CQ of at least `size` entries notifying `channel`; `shared`: the channel also serves
    // another CQ. 0 or RPMA_E_PROVIDER.
    virtual int create_cq(CompletionChannel *channel, bool shared, uint32_t size,
                          std::unique_ptr<CompletionQueue> *out) = 0;
    // 0 or RPMA_E_PROVIDER.
    virtual int create_srq(uint32_t size, std::unique_ptr<SharedRecvQueue> *out) = 0;

    // Starts listening. RPMA_E_PROVIDER (address, port, engine).
    virtual int listen(const char *addr, const char *port, std::shared_ptr<Listener> *out) = 0;
    // A queue pair that will connect to addr:port (client side). RPMA_E_PROVIDER when the
    // address does not resolve or the engine cannot start.
    virtual int create_qp(const char *addr, const char *port, const QpAttr &attr,
                          std::shared_ptr<QueuePair> *out) = 0;
    // A queue pair for an incoming request (server side), which QueuePair::accept is later given.
    // RPMA_E_PROVIDER.
    virtual int create_qp(const QpAttr &attr, IncomingRequest &req,
                          std::shared_ptr<QueuePair> *out) = 0;
};

// A device: what rpma_utils_get_ibv_context hands out as an ibv_context.
class Device {
  public:
    virtual ~Device() = default;
    virtual ibv_context *context() noexcept = 0;
    // rpma_utils_ibv_context_is_odp_capable: 0 or RPMA_E_PROVIDER.
    virtual int odp_capable(int *out) = 0;
    // A new domain on this device (no thread starts before the domain is used). 0,
    // RPMA_E_NOMEM, RPMA_E_PROVIDER or RPMA_E_UNKNOWN (rpma_peer_new's codes).
    virtual int open_domain(std::unique_ptr<Domain> *out) = 0;
};

// registry.cc: the device for an address, from the provider chosen for it (RPMA_PROVIDER
// forces one: "verbs", "tcp" or "shm"). RPMA_E_PROVIDER if the address resolves to no device or
// the forced provider is unknown.
int lookup_device(const char *addr, rpma_util_ibv_context_type type, ibv_context **out);
// Which data path connections take (RPMA_PROVIDER, read at each call): kAuto moves a
// connection between processes on one host onto shared memory and keeps the others on tcp;
// kTcp keeps all on tcp; kShm refuses a connection that cannot move; kVerbs takes the RDMA
// device serving the address, or fails.
enum class Choice { kAuto, kTcp, kShm, kVerbs };
Choice provider_choice() noexcept;
// The device behind a context this library handed out, or nullptr.
Device *device_from_context(const ibv_context *ctx) noexcept;

}  // namespace rpma::prov
