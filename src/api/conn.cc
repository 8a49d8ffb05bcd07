// rpma_conn_*: events, private data, queues, teardown
#include "core/conn.h"

#include "api/shim.h"
#include "core/peer_cfg.h"

using namespace rpma;

namespace {
Conn *C(struct rpma_conn *c) {
    return api::obj<Conn>(c);
}
const Conn *C(const struct rpma_conn *c) {
    return api::obj<Conn>(c);
}
}  // namespace

RPMA_EXPORT int rpma_conn_get_event_fd(const struct rpma_conn *conn, int *fd) {
    if (!conn || !fd) return RPMA_E_INVAL;
    *fd = C(conn)->event_fd();
    return 0;
}

RPMA_EXPORT int rpma_conn_next_event(struct rpma_conn *conn, enum rpma_conn_event *event) {
    if (!conn || !event) return RPMA_E_INVAL;
    return api::guarded_wait([&] { return C(conn)->next_event(event); });
}

RPMA_EXPORT int rpma_conn_get_private_data(const struct rpma_conn *conn,
                                           struct rpma_conn_private_data *pdata) {
    if (!conn || !pdata) return RPMA_E_INVAL;
    C(conn)->private_data(pdata);
    return 0;
}

RPMA_EXPORT int rpma_conn_apply_remote_peer_cfg(struct rpma_conn *conn,
                                                const struct rpma_peer_cfg *pcfg) {
    if (!conn || !pcfg) return RPMA_E_INVAL;
    C(conn)->apply_remote_peer_cfg(api::obj<PeerCfg>(pcfg)->direct_write_to_pmem());
    return 0;
}

RPMA_EXPORT int rpma_conn_get_qp_num(const struct rpma_conn *conn, uint32_t *qp_num) {
    if (!conn || !qp_num) return RPMA_E_INVAL;
    *qp_num = C(conn)->qp_num();
    return 0;
}

RPMA_EXPORT int rpma_conn_get_cq(const struct rpma_conn *conn, struct rpma_cq **cq_ptr) {
    if (!conn || !cq_ptr) return RPMA_E_INVAL;
    *cq_ptr = api::handle<rpma_cq>(C(conn)->cq());
    return 0;
}

RPMA_EXPORT int rpma_conn_get_rcq(const struct rpma_conn *conn, struct rpma_cq **rcq_ptr) {
    if (!conn || !rcq_ptr) return RPMA_E_INVAL;
    *rcq_ptr = api::handle<rpma_cq>(C(conn)->rcq());  // NULL without an RCQ of its own
    return 0;
}

RPMA_EXPORT int rpma_conn_get_compl_fd(const struct rpma_conn *conn, int *fd) {
    if (!conn || !fd) return RPMA_E_INVAL;
    if (!C(conn)->shared_channel()) return RPMA_E_NOT_SHARED_CHNL;
    *fd = C(conn)->compl_fd();
    return 0;
}

RPMA_EXPORT int rpma_conn_wait(struct rpma_conn *conn, int flags, struct rpma_cq **cq,
                               bool *is_rcq) {
    if (!conn || !cq) return RPMA_E_INVAL;
    return api::guarded_wait([&] {
        prov::CompletionQueue *fired = nullptr;
        int ret = C(conn)->wait(flags, &fired, is_rcq);
        if (ret == 0) *cq = api::handle<rpma_cq>(fired);
        return ret;
    });
}

RPMA_EXPORT int rpma_conn_disconnect(struct rpma_conn *conn) {
    if (!conn) return RPMA_E_INVAL;
    if (int ret = C(conn)->peer()->check_process("the connection")) return ret;
    return api::guarded([&] { return C(conn)->disconnect(); });
}

RPMA_EXPORT int rpma_conn_delete(struct rpma_conn **conn_ptr) {
    // in a forked child the parent's connection is left alone; *conn_ptr is cleared, as the man
    // page says for any failure
    return api::destroy_or_abandon<Conn>(
        conn_ptr, [](Conn *c) { return c->peer()->check_process("the connection"); });
}
