// Routes the rdma_cm events of a domain's connections: one event channel that every connected
// id is migrated to, and one thread that reads it and hands each event to its connection's sink
// (which turns it into an rpma_conn_event on the connection's own fd).
#pragma once

#include <rdma/rdma_cma.h>

#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/fd.h"

namespace rpma::verbs {

class CmEventSink {
  public:
    virtual ~CmEventSink() = default;
    // Called on the pump's thread with the pump's lock held: must not block.
    virtual void on_cm_event(const rdma_cm_event &ev) = 0;
};

class CmEventPump {
  public:
    // 0 or RPMA_E_PROVIDER (channel, eventfd or thread).
    static int create(std::unique_ptr<CmEventPump> *out);
    ~CmEventPump();
    CmEventPump(const CmEventPump &) = delete;
    CmEventPump &operator=(const CmEventPump &) = delete;

    rdma_event_channel *channel() const noexcept { return ch_; }
    // Moves id onto this channel and routes its events to sink. 0 or RPMA_E_PROVIDER.
    int adopt(rdma_cm_id *id, CmEventSink *sink);
    // Stops routing id's events; once it returns the sink is never called again for id.
    void forget(rdma_cm_id *id) noexcept;

  private:
    CmEventPump(rdma_event_channel *ch, Fd wake) noexcept;
    void run() noexcept;
    static constexpr int kRetryMs = 100;  // the wait before reading again after a failed read

    rdma_event_channel *ch_;
    Fd wake_;  // eventfd: the destructor stops the thread through it
    std::mutex mu_;
    std::unordered_map<rdma_cm_id *, CmEventSink *> sinks_;
    std::thread thread_;
};

}  // namespace rpma::verbs
