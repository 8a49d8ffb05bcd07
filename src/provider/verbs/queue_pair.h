// A verbs queue pair: an RC QP on an rdma_cm id. The client's id resolves at creation and
// connects at connect(); the server's comes from a ConnectRequest. The id lives on an event
// channel of its own, whose fd is the connection's event fd: next_event reads it on the
// caller's thread, as upstream does, so the provider runs no thread of its own.
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "provider/provider.h"
#include "provider/verbs/connect_request.h"
#include "provider/verbs/region.h"

namespace rpma::verbs {

class Domain;

class QueuePair final : public prov::QueuePair {
  public:
    // Client side: resolves addr:port within attr.timeout_ms. 0 or RPMA_E_PROVIDER.
    static int create_active(Domain &dom, const char *addr, const char *port,
                             const prov::QpAttr &attr, std::shared_ptr<prov::QueuePair> *out);
    // Server side, on the request's id. 0 or RPMA_E_PROVIDER.
    static int create_passive(Domain &dom, const prov::QpAttr &attr, ConnectRequest &req,
                              std::shared_ptr<prov::QueuePair> *out);
    ~QueuePair() override;

    uint32_t qp_num() const noexcept override;
    int connect(const void *pdata, uint8_t pdata_len) override;
    int accept(std::unique_ptr<prov::IncomingRequest> req, const void *pdata,
               uint8_t pdata_len) override;
    int post_send(prov::SendWr &&wr) override;
    int post_recv(prov::RecvWr &&r) override;
    int disconnect() override;
    void close() override;
    const std::vector<uint8_t> &remote_pdata() const noexcept override { return remote_pdata_; }
    int event_fd() const noexcept override { return ch_ ? ch_->fd : -1; }
    int next_event(rpma_conn_event *ev) override;

  private:
    explicit QueuePair(Domain &dom) noexcept;
    // The QP on id_, the flush's read target, and id_ moved to its own event channel. 0,
    // RPMA_E_NOMEM or RPMA_E_PROVIDER.
    int setup(const prov::QpAttr &attr);
    // What an rdma_cm event means to the application; nothing for those it is not told.
    std::optional<rpma_conn_event> translate(const rdma_cm_event &ev);

    Domain &dom_;
    rdma_cm_id *id_ = nullptr;
    bool passive_ = false;
    bool unanswered_ = false;  // a request's id, rejected at close() unless accepted
    rdma_event_channel *ch_ = nullptr;
    std::mutex events_mu_;  // one reader of ch_ at a time (take_when_readable)
    std::vector<uint8_t> remote_pdata_;
    void *flush_page_ = nullptr;  // a page of its own: ibv_fork_init may mark it DONTFORK
    std::unique_ptr<Region> flush_target_;
    std::atomic<bool> closed_{false};
    std::atomic<bool> closed_event_sent_{false};  // DISCONNECTED and TIMEWAIT_EXIT: one CLOSED
    pid_t pid_;
};

}  // namespace rpma::verbs
