// Shared receive queue configuration (rpma_srq_cfg).
#pragma once

#include <cstdint>

namespace rpma {

class SrqCfg {
  public:
    // Used wherever rpma_srq_new receives cfg == NULL.
    static const SrqCfg &defaults() noexcept;

    uint32_t rq_size() const noexcept { return rq_size_; }
    // 0 means the SRQ gets no receive CQ of its own.
    uint32_t rcq_size() const noexcept { return rcq_size_; }

    void set_rq_size(uint32_t size) noexcept { rq_size_ = size; }
    void set_rcq_size(uint32_t size) noexcept { rcq_size_ = size; }

  private:
    static constexpr uint32_t kDefaultSize = 100;  // librpma's RPMA_DEFAULT_SRQ_SIZE

    uint32_t rq_size_ = kDefaultSize;
    uint32_t rcq_size_ = kDefaultSize;
};

}  // namespace rpma
