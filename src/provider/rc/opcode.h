// Every fact about a request opcode, in one table that the requester, the responder and the
// completer read instead of each switching on the opcode (after rxe's rxe_opcode table).
#pragma once

#include <infiniband/verbs.h>
#include <librpma.h>

#include "provider/rc/frame.h"

namespace rpma::rc {

struct OpInfo {
    const char *name;
    bool payload;        // data follows the header (the length is the payload's)
    bool recv;           // consumes a receive at the responder
    bool modifies;       // changes target memory: waits until earlier read answers have left
    int usage;           // the rkey's region needs one of these usages (0: no rkey)
    ibv_wc_opcode wc;    // the requester's completion opcode
    uint32_t fixed_len;  // 0: any length; else exactly this many bytes at an address aligned to it
    // The requester's completion as rxe fills it: byte_len is the request's length unless fixed
    // here (nonzero), and IBV_WC_WITH_IMM is set for a request with immediate data.
    uint32_t wc_len;
    bool wc_imm;
};

// The usages that give a region a NIC's remote access, as upstream librpma registers them: a
// flush of either type is carried out as a read, so any of the three allows remote reads.
inline constexpr int kRemoteRead = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
                                   RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;
inline constexpr int kRemoteWrite = RPMA_MR_USAGE_WRITE_DST;

// Indexed by Op; only requests (is_request) have an entry that means anything.
inline constexpr OpInfo kOpTable[] = {
    {"invalid", false, false, false, 0, IBV_WC_RDMA_WRITE, 0, 0, false},
    {"write", true, false, true, kRemoteWrite, IBV_WC_RDMA_WRITE, 0, 0, false},
    {"write_imm", true, true, true, kRemoteWrite, IBV_WC_RDMA_WRITE, 0, 0, true},
    {"read", false, false, false, kRemoteRead, IBV_WC_RDMA_READ, 0, 0, false},
    {"atomic_write", false, false, true, kRemoteWrite, IBV_WC_RDMA_WRITE,
     RPMA_ATOMIC_WRITE_ALIGNMENT, RPMA_ATOMIC_WRITE_ALIGNMENT, false},
    // a flush completes as the 8-byte read that implements it on RDMA (upstream librpma); its
    // type is the requester's to check, from the region's descriptor
    {"flush", false, false, false, kRemoteRead, IBV_WC_RDMA_READ, 0, 8, false},
    {"send", true, true, true, 0, IBV_WC_SEND, 0, 0, false},
    {"send_imm", true, true, true, 0, IBV_WC_SEND, 0, 0, true},
};
static_assert(sizeof(kOpTable) / sizeof(kOpTable[0]) == static_cast<size_t>(Op::kSendImm) + 1);

inline const OpInfo &op_info(Op op) noexcept {
    return kOpTable[is_request(static_cast<uint8_t>(op)) ? static_cast<int>(op) : 0];
}

}  // namespace rpma::rc
