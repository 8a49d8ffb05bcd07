// rpma_conn_req_new, _delete, _connect, _recv, _get_private_data
#include "core/conn_req.h"

#include "api/shim.h"
#include "core/conn_cfg.h"
#include "core/mr_local.h"
#include "core/port.h"

using namespace rpma;

RPMA_EXPORT int rpma_conn_req_new(struct rpma_peer *peer, const char *addr, const char *port,
                                  const struct rpma_conn_cfg *cfg, struct rpma_conn_req **req_ptr) {
    if (!peer || !addr || !port || !req_ptr || !port_ok(port)) return RPMA_E_INVAL;
    return api::guarded([&] {
        const ConnCfg &c = cfg ? *api::obj<ConnCfg>(cfg) : ConnCfg::defaults();
        ConnReq *req = nullptr;
        int ret = ConnReq::outgoing(api::obj<Peer>(peer), addr, port, c, &req);
        if (ret == 0) *req_ptr = api::handle<rpma_conn_req>(req);
        return ret;
    });
}

RPMA_EXPORT int rpma_conn_req_delete(struct rpma_conn_req **req_ptr) {
    // an incoming request's delete rejects it on a socket the parent shares: a forked child
    // leaves it alone (*req_ptr cleared, as the man page says for any failure)
    return api::destroy_or_abandon<ConnReq>(
        req_ptr, [](ConnReq *r) { return r->peer()->check_process("the connection request"); });
}

RPMA_EXPORT int rpma_conn_req_connect(struct rpma_conn_req **req_ptr,
                                      const struct rpma_conn_private_data *pdata,
                                      struct rpma_conn **conn_ptr) {
    if (!req_ptr || !*req_ptr) return RPMA_E_INVAL;
    ConnReq *req = api::obj<ConnReq>(*req_ptr);
    *req_ptr = nullptr;  // consumed whatever happens
    // a forked child leaves it alone: deleting it would reject it on the parent's socket
    if (int ret = req->peer()->check_process("the connection request")) return ret;
    int ret;
    if (!conn_ptr || (pdata && (!pdata->ptr || pdata->len == 0))) {
        ret = RPMA_E_INVAL;
    } else {
        ret = api::guarded([&] {
            Conn *c = nullptr;
            int r = req->connect(pdata, &c);
            if (r == 0) *conn_ptr = api::handle<rpma_conn>(c);
            return r;
        });
    }
    api::guarded([&] {
        delete req;
        return 0;
    });
    return ret;
}

RPMA_EXPORT int rpma_conn_req_recv(struct rpma_conn_req *req, struct rpma_mr_local *dst,
                                   size_t offset, size_t len, const void *op_context) {
    if (!req || !dst) return RPMA_E_INVAL;
    return api::guarded([&] {
        return api::obj<ConnReq>(req)->recv(api::obj<MrLocal>(dst), offset, len,
                                            reinterpret_cast<uintptr_t>(op_context));
    });
}

RPMA_EXPORT int rpma_conn_req_get_private_data(const struct rpma_conn_req *req,
                                               struct rpma_conn_private_data *pdata) {
    if (!req || !pdata) return RPMA_E_INVAL;
    api::obj<ConnReq>(req)->private_data(pdata);
    return 0;
}
