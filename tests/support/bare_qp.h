// The RC engine's queue pair with no transport of its own, for tests and fuzz targets: they
// hand it streams (in-memory or fds of their own) and step it through the interface a transport
// uses, rc::QueuePair's protected one, so nothing in src/ needs a hook for them.
#pragma once

#include <librpma.h>

#include <memory>

#include "provider/rc/queue_pair.h"

namespace rpma::rc {

class BareQp : public QueuePair {
  public:
    BareQp(Engine *e, MrTable *mrs, const QpConfig &cfg, FdQueue<rpma_conn_event> *events)
        : QueuePair(e, mrs, cfg, events) {}
    int connect(const void *, uint8_t) override { return RPMA_E_NOSUPP; }
    int accept(std::unique_ptr<prov::IncomingRequest>, const void *, uint8_t) override {
        return RPMA_E_NOSUPP;
    }

  private:
    void setup_events(Stream &, uint32_t) override {}
    void on_events(int, uint32_t) override {}  // no fd of its own
};

}  // namespace rpma::rc
