// The data-path operations: rpma_read, rpma_write(_with_imm), rpma_atomic_write, rpma_flush,
// rpma_send(_with_imm), rpma_recv. Checks follow each man page; remote bounds and usage are the
// remote side's to check, and come back as error completions.
#include "api/shim.h"
#include "core/conn.h"
#include "core/mr_local.h"
#include "core/mr_remote.h"

using namespace rpma;

namespace {

uint64_t ctx(const void *op_context) {
    return reinterpret_cast<uintptr_t>(op_context);
}

// A 0-byte transfer names no regions; otherwise both regions must be given.
bool pair_ok(const void *local, const void *remote, size_t loff, size_t roff, size_t len) {
    if (!local && (remote || loff || roff || len)) return false;
    if (!remote && (local || loff || roff || len)) return false;
    return true;
}

}  // namespace

RPMA_EXPORT int rpma_read(struct rpma_conn *conn, struct rpma_mr_local *dst, size_t dst_offset,
                          const struct rpma_mr_remote *src, size_t src_offset, size_t len,
                          int flags, const void *op_context) {
    if (!conn || flags == 0 || !pair_ok(dst, src, dst_offset, src_offset, len)) return RPMA_E_INVAL;
    return api::guarded([&] {
        return api::obj<Conn>(conn)->read(api::obj<MrLocal>(dst), dst_offset,
                                          api::obj<MrRemote>(src), src_offset, len, flags,
                                          ctx(op_context));
    });
}

RPMA_EXPORT int rpma_write(struct rpma_conn *conn, struct rpma_mr_remote *dst, size_t dst_offset,
                           const struct rpma_mr_local *src, size_t src_offset, size_t len,
                           int flags, const void *op_context) {
    if (!conn || flags == 0 || !pair_ok(src, dst, src_offset, dst_offset, len)) return RPMA_E_INVAL;
    return api::guarded([&] {
        return api::obj<Conn>(conn)->write(api::obj<MrRemote>(dst), dst_offset,
                                           api::obj<MrLocal>(src), src_offset, len, flags,
                                           ctx(op_context), nullptr);
    });
}

RPMA_EXPORT int rpma_write_with_imm(struct rpma_conn *conn, struct rpma_mr_remote *dst,
                                    size_t dst_offset, const struct rpma_mr_local *src,
                                    size_t src_offset, size_t len, int flags, uint32_t imm,
                                    const void *op_context) {
    if (!conn || flags == 0 || !pair_ok(src, dst, src_offset, dst_offset, len)) return RPMA_E_INVAL;
    return api::guarded([&] {
        return api::obj<Conn>(conn)->write(api::obj<MrRemote>(dst), dst_offset,
                                           api::obj<MrLocal>(src), src_offset, len, flags,
                                           ctx(op_context), &imm);
    });
}

RPMA_EXPORT int rpma_atomic_write(struct rpma_conn *conn, struct rpma_mr_remote *dst,
                                  size_t dst_offset, const char src[8], int flags,
                                  const void *op_context) {
    if (!conn || !dst || !src || flags == 0 || dst_offset % RPMA_ATOMIC_WRITE_ALIGNMENT != 0)
        return RPMA_E_INVAL;
    return api::guarded([&] {
        return api::obj<Conn>(conn)->atomic_write(api::obj<MrRemote>(dst), dst_offset, src, flags,
                                                  ctx(op_context));
    });
}

RPMA_EXPORT int rpma_flush(struct rpma_conn *conn, struct rpma_mr_remote *dst, size_t dst_offset,
                           size_t len, enum rpma_flush_type type, int flags,
                           const void *op_context) {
    const int t = api::enum_value(type);
    if (!conn || !dst || flags == 0 ||
        (t != RPMA_FLUSH_TYPE_PERSISTENT && t != RPMA_FLUSH_TYPE_VISIBILITY))
        return RPMA_E_INVAL;
    return api::guarded([&] {
        return api::obj<Conn>(conn)->flush(api::obj<MrRemote>(dst), dst_offset, len, type, flags,
                                           ctx(op_context));
    });
}

RPMA_EXPORT int rpma_send(struct rpma_conn *conn, const struct rpma_mr_local *src, size_t offset,
                          size_t len, int flags, const void *op_context) {
    if (!conn || flags == 0 || (!src && (offset || len))) return RPMA_E_INVAL;
    return api::guarded([&] {
        return api::obj<Conn>(conn)->send(api::obj<MrLocal>(src), offset, len, flags,
                                          ctx(op_context), nullptr);
    });
}

RPMA_EXPORT int rpma_send_with_imm(struct rpma_conn *conn, const struct rpma_mr_local *src,
                                   size_t offset, size_t len, int flags, uint32_t imm,
                                   const void *op_context) {
    if (!conn || flags == 0 || (!src && (offset || len))) return RPMA_E_INVAL;
    return api::guarded([&] {
        return api::obj<Conn>(conn)->send(api::obj<MrLocal>(src), offset, len, flags,
                                          ctx(op_context), &imm);
    });
}

RPMA_EXPORT int rpma_recv(struct rpma_conn *conn, struct rpma_mr_local *dst, size_t offset,
                          size_t len, const void *op_context) {
    if (!conn || (!dst && (offset || len))) return RPMA_E_INVAL;
    return api::guarded([&] {
        return api::obj<Conn>(conn)->recv(api::obj<MrLocal>(dst), offset, len, ctx(op_context));
    });
}
