// Connection configuration (rpma_conn_cfg): queue sizes, timeout, completion channel, SRQ.
#pragma once

#include <librpma.h>

#include <cstdint>

namespace rpma {

class ConnCfg {
  public:
    // Used wherever an API call receives cfg == NULL.
    static const ConnCfg &defaults() noexcept;

    int timeout_ms() const noexcept { return timeout_ms_; }
    uint32_t cq_size() const noexcept { return cq_size_; }
    uint32_t sq_size() const noexcept { return sq_size_; }
    uint32_t rq_size() const noexcept { return rq_size_; }
    uint32_t rcq_size() const noexcept { return rcq_size_; }
    bool shared_channel() const noexcept { return shared_channel_; }
    rpma_srq *srq() const noexcept { return srq_; }

    // RPMA_E_INVAL for a negative timeout; the old value is kept then.
    int set_timeout_ms(int timeout_ms) noexcept;
    void set_cq_size(uint32_t size) noexcept { cq_size_ = size; }
    void set_sq_size(uint32_t size) noexcept { sq_size_ = size; }
    void set_rq_size(uint32_t size) noexcept { rq_size_ = size; }
    void set_rcq_size(uint32_t size) noexcept { rcq_size_ = size; }
    void set_shared_channel(bool shared) noexcept { shared_channel_ = shared; }
    // Not owned: the application keeps the SRQ alive while connections use it.
    void set_srq(rpma_srq *srq) noexcept { srq_ = srq; }

  private:
    static constexpr uint32_t kDefaultQueueSize = 10;  // librpma's RPMA_DEFAULT_Q_SIZE

    int timeout_ms_ = RPMA_DEFAULT_TIMEOUT_MS;
    uint32_t cq_size_ = kDefaultQueueSize;
    uint32_t sq_size_ = kDefaultQueueSize;
    uint32_t rq_size_ = kDefaultQueueSize;
    uint32_t rcq_size_ = 0;  // 0: receive completions share the main CQ
    bool shared_channel_ = false;
    rpma_srq *srq_ = nullptr;
};

}  // namespace rpma
