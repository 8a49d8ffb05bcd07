// libFuzzer target: MR and peer-config descriptors as they arrive in private data.
#include <librpma.h>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct rpma_mr_remote *mr = nullptr;
    if (rpma_mr_remote_from_descriptor(data, size, &mr) == 0) {
        size_t sz;
        int ft;
        if (rpma_mr_remote_get_size(mr, &sz) || rpma_mr_remote_get_flush_type(mr, &ft))
            __builtin_trap();
        if (ft & ~(RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT))
            __builtin_trap();
        rpma_mr_remote_delete(&mr);
    }
    struct rpma_peer_cfg *pcfg = nullptr;
    if (rpma_peer_cfg_from_descriptor(data, size, &pcfg) == 0) {
        bool v;
        if (rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &v)) __builtin_trap();
        rpma_peer_cfg_delete(&pcfg);
    }
    return 0;
}
