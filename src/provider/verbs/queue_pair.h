// A verbs queue pair: an RC QP on an rdma_cm id. The client's id resolves at creation and
// connects at connect(); the server's comes from a ConnectRequest. Once connecting, the id's
// events arrive through the domain's CmEventPump and become rpma_conn_events.
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <vector>

#include "provider/provider.h"
#include "provider/verbs/cm_event_pump.h"
#include "provider/verbs/connect_request.h"
#include "provider/verbs/region.h"

namespace rpma::verbs {

class Domain;

class QueuePair final : public prov::QueuePair, public CmEventSink {
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

    void on_cm_event(const rdma_cm_event &ev) override;

  private:
    QueuePair(Domain &dom, const prov::QpAttr &attr) noexcept;
    // The QP on id_, the flush's read target, and the pump's routing. 0 or RPMA_E_PROVIDER.
    int setup(const prov::QpAttr &attr);

    Domain &dom_;
    rdma_cm_id *id_ = nullptr;
    bool passive_ = false;
    bool unanswered_ = false;  // a request's id, rejected at close() unless accepted
    CmEventPump *pump_ = nullptr;
    FdQueue<rpma_conn_event> *events_;
    std::vector<uint8_t> remote_pdata_;
    void *flush_page_ = nullptr;  // a page of its own: ibv_fork_init marks it DONTFORK
    std::unique_ptr<Region> flush_target_;
    std::atomic<bool> closed_{false};
    bool closed_event_sent_ = false;  // the pump's only
    pid_t pid_;
};

}  // namespace rpma::verbs
