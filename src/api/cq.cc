// rpma_cq_get_fd, rpma_cq_wait, rpma_cq_get_wc
#include "api/shim.h"
#include "provider/provider.h"

using namespace rpma;

RPMA_EXPORT int rpma_cq_get_fd(const struct rpma_cq *cq, int *fd) {
    if (!cq || !fd) return RPMA_E_INVAL;
    *fd = api::obj<prov::CompletionQueue>(cq)->fd();
    return 0;
}

RPMA_EXPORT int rpma_cq_wait(struct rpma_cq *cq) {
    if (!cq) return RPMA_E_INVAL;
    return api::guarded_wait([&] { return api::obj<prov::CompletionQueue>(cq)->wait(); });
}

RPMA_EXPORT int rpma_cq_get_wc(struct rpma_cq *cq, int num_entries, struct ibv_wc *wc,
                               int *num_entries_got) {
    if (!cq || !wc || num_entries < 1 || (num_entries > 1 && !num_entries_got)) return RPMA_E_INVAL;
    return api::guarded([&] {
        return api::obj<prov::CompletionQueue>(cq)->get_wc(num_entries, wc, num_entries_got);
    });
}
