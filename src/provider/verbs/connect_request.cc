#include "provider/verbs/connect_request.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace rpma::verbs {

ConnectRequest::ConnectRequest(rdma_cm_id *id, const void *pdata, uint8_t len)
    : id_(id), pid_(::getpid()) {
    if (pdata && len) {
        auto *p = static_cast<const uint8_t *>(pdata);
        pdata_.assign(p, p + len);
    }
}

ConnectRequest::~ConnectRequest() {
    if (!id_ || ::getpid() != pid_) return;
    if (rdma_reject(id_, nullptr, 0) != 0)
        RPMA_LOG_WARNING("rdma_reject: %s", std::strerror(errno));
    if (id_->qp) rdma_destroy_qp(id_);
    if (rdma_destroy_id(id_) != 0) RPMA_LOG_ERROR("rdma_destroy_id: %s", std::strerror(errno));
}

rdma_cm_id *ConnectRequest::release() noexcept {
    rdma_cm_id *id = id_;
    id_ = nullptr;
    return id;
}

}  // namespace rpma::verbs
