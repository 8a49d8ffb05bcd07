// rpma_ep_listen, rpma_ep_shutdown, rpma_ep_get_fd, rpma_ep_next_conn_req
#include "core/ep.h"

#include "api/shim.h"
#include "core/conn_cfg.h"
#include "core/conn_req.h"
#include "core/port.h"

using namespace rpma;

RPMA_EXPORT int rpma_ep_listen(struct rpma_peer *peer, const char *addr, const char *port,
                               struct rpma_ep **ep_ptr) {
    if (!peer || !addr || !port || !ep_ptr || !port_ok(port)) return RPMA_E_INVAL;
    return api::guarded([&] {
        Ep *ep = nullptr;
        int ret = Ep::listen(api::obj<Peer>(peer), addr, port, &ep);
        if (ret == 0) *ep_ptr = api::handle<rpma_ep>(ep);
        return ret;
    });
}

RPMA_EXPORT int rpma_ep_shutdown(struct rpma_ep **ep_ptr) {
    return api::destroy<Ep>(ep_ptr,
                            [](Ep *ep) { return ep->peer()->check_process("the endpoint"); });
}

RPMA_EXPORT int rpma_ep_get_fd(const struct rpma_ep *ep, int *fd) {
    if (!ep || !fd) return RPMA_E_INVAL;
    *fd = api::obj<Ep>(ep)->fd();
    return 0;
}

RPMA_EXPORT int rpma_ep_next_conn_req(struct rpma_ep *ep, const struct rpma_conn_cfg *cfg,
                                      struct rpma_conn_req **req_ptr) {
    if (!ep || !req_ptr) return RPMA_E_INVAL;
    if (int ret = api::obj<Ep>(ep)->peer()->check_process("the endpoint")) return ret;
    return api::guarded_wait([&] {
        const ConnCfg &c = cfg ? *api::obj<ConnCfg>(cfg) : ConnCfg::defaults();
        ConnReq *req = nullptr;
        int ret = api::obj<Ep>(ep)->next_conn_req(c, &req);
        if (ret == 0) *req_ptr = api::handle<rpma_conn_req>(req);
        return ret;
    });
}
