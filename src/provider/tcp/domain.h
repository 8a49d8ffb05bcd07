// The tcp provider's domain: one rpma_peer's regions (by rkey) and its progress engine, which
// starts on first use (none at load time, so a process may fork first).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "provider/provider.h"
#include "provider/soft/engine.h"
#include "provider/soft/mr_table.h"

namespace rpma::tcp {

class QueuePair;
class StreamUpgrade;

class Domain final : public prov::Domain {
  public:
    // upgrade: the way off tcp its connections may take (upgrade.h; nullptr: none).
    explicit Domain(StreamUpgrade *upgrade) noexcept : upgrade_(upgrade) {}
    ~Domain() override;

    const prov::Caps &caps() const noexcept override;
    int check_process(const char *what) const noexcept override;

    int register_memory(char *addr, size_t size, int usage,
                        std::shared_ptr<prov::MemoryRegion> *out) override;
    void deregister(const std::shared_ptr<prov::MemoryRegion> &mr) noexcept override;

    int create_channel(std::unique_ptr<prov::CompletionChannel> *out) override;
    int advise(const prov::MemoryRegion &mr, char *start, size_t len, int advice,
               uint32_t flags) override;
    int create_cq(prov::CompletionChannel *channel, bool shared, uint32_t size,
                  std::unique_ptr<prov::CompletionQueue> *out) override;
    int create_srq(uint32_t size, std::unique_ptr<prov::SharedRecvQueue> *out) override;

    int listen(const char *addr, const char *port, std::shared_ptr<prov::Listener> *out) override;
    int create_qp(const char *addr, const char *port, const prov::QpAttr &attr,
                  std::shared_ptr<prov::QueuePair> *out) override;
    int create_qp(const prov::QpAttr &attr, prov::IncomingRequest &req,
                  std::shared_ptr<prov::QueuePair> *out) override;

    // The progress engine, started on first use; nullptr if it cannot start, or if it was
    // started by the parent of this forked process.
    Engine *engine();

  private:
    std::shared_ptr<QueuePair> make_qp(Engine *e, const prov::QpAttr &attr);

    StreamUpgrade *upgrade_;
    MrTable mrs_;
    std::mutex mu_;
    std::unique_ptr<Engine> engine_;
    std::atomic<Engine *> started_{nullptr};  // engine_, readable without mu_ (fork)
};

}  // namespace rpma::tcp
