/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 05-flush-to-persistent/client.c -- applies the server's peer configuration, writes a text into
 * the server's memory and flushes it with the chosen type: PERSISTENT (durable on the server
 * when the flush completes) or VISIBILITY (placed, visible to the server). When the server does
 * not offer PERSISTENT, the client says so and uses VISIBILITY.
 *
 * usage: client ADDR PORT persistent|visibility [TEXT]
 */
#include <string.h>

#include "common.h"

struct server_pdata {
    uint8_t mr_desc_size;
    uint8_t pcfg_desc_size;
    char descriptors[24];
};

int main(int argc, char *argv[]) {
    ex_start();
    if (argc < 4 || (strcmp(argv[3], "persistent") != 0 && strcmp(argv[3], "visibility") != 0)) {
        fprintf(stderr, "usage: %s ADDR PORT persistent|visibility [TEXT]\n", argv[0]);
        return 2;
    }
    const char *addr = argv[1], *port = argv[2];
    bool want_persistent = strcmp(argv[3], "persistent") == 0;
    const char *text = argc > 4 ? argv[4] : "Hello, flushed world!";
    size_t len = strlen(text) + 1;

    struct rpma_peer *peer = ex_peer_new(addr, false);
    char *src = ex_malloc(len);
    memcpy(src, text, len);
    struct rpma_mr_local *src_mr = NULL;
    EX_CHECK(rpma_mr_reg(peer, src, len, RPMA_MR_USAGE_WRITE_SRC, &src_mr));
    struct rpma_conn *conn = ex_connect(peer, addr, port, NULL, NULL, 0);

    /* unpack the two descriptors */
    struct rpma_conn_private_data pd = {0};
    EX_CHECK(rpma_conn_get_private_data(conn, &pd));
    struct server_pdata data;
    if (pd.len < sizeof(data)) EX_FAIL("short private data: %u bytes", pd.len);
    memcpy(&data, pd.ptr, sizeof(data));
    if (data.mr_desc_size + data.pcfg_desc_size > sizeof(data.descriptors))
        EX_FAIL("malformed private data");
    struct rpma_mr_remote *dst_mr = NULL;
    EX_CHECK(rpma_mr_remote_from_descriptor(data.descriptors, data.mr_desc_size, &dst_mr));
    struct rpma_peer_cfg *pcfg = NULL;
    EX_CHECK(rpma_peer_cfg_from_descriptor(data.descriptors + data.mr_desc_size,
                                           data.pcfg_desc_size, &pcfg));
    bool direct = false;
    EX_CHECK(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &direct));
    size_t dst_size = 0;
    int flush_types = 0;
    EX_CHECK(rpma_mr_remote_get_size(dst_mr, &dst_size));
    EX_CHECK(rpma_mr_remote_get_flush_type(dst_mr, &flush_types));
    if (len > dst_size) EX_FAIL("the text does not fit the server's %zu bytes", dst_size);
    printf("the server offers %zu bytes, direct_write_to_pmem=%s, flush types:%s%s\n", dst_size,
           direct ? "true" : "false",
           (flush_types & RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT) ? " PERSISTENT" : "",
           (flush_types & RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY) ? " VISIBILITY" : "");

    enum rpma_flush_type type = RPMA_FLUSH_TYPE_VISIBILITY;
    if (want_persistent) {
        if (direct && (flush_types & RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT)) {
            /* until the peer's configuration is applied, the connection refuses PERSISTENT;
             * why_end() gives the reason the library logs */
            why_begin();
            int ret = rpma_flush(conn, dst_mr, 0, len, RPMA_FLUSH_TYPE_PERSISTENT,
                                 RPMA_F_COMPLETION_ALWAYS, NULL);
            const char *why = why_end(ret);
            if (ret != RPMA_E_NOSUPP)
                EX_FAIL("PERSISTENT flush before applying the peer cfg: %s, expected %s",
                        rpma_err_2str(ret), rpma_err_2str(RPMA_E_NOSUPP));
            printf("before applying the peer cfg a PERSISTENT flush is refused: %s\n", why);
            type = RPMA_FLUSH_TYPE_PERSISTENT;
        } else {
            printf("the server cannot persist this memory: using VISIBILITY instead\n");
        }
    }
    EX_CHECK(rpma_conn_apply_remote_peer_cfg(conn, pcfg));
    EX_CHECK(rpma_peer_cfg_delete(&pcfg));

    struct rpma_cq *cq = NULL;
    EX_CHECK(rpma_conn_get_cq(conn, &cq));
    EX_CHECK(rpma_write(conn, dst_mr, 0, src_mr, 0, len, RPMA_F_COMPLETION_ON_ERROR, NULL));
    EX_CHECK(rpma_flush(conn, dst_mr, 0, len, type, RPMA_F_COMPLETION_ALWAYS, src));
    ex_cq_expect(cq, IBV_WC_RDMA_READ, src, NULL);
    printf("wrote \"%s\" and flushed it: %s\n", text,
           type == RPMA_FLUSH_TYPE_PERSISTENT ? "PERSISTENT (durable on the server)"
                                              : "VISIBILITY (placed in the server's memory)");

    EX_CHECK(rpma_mr_remote_delete(&dst_mr));
    ex_disconnect(&conn);
    EX_CHECK(rpma_mr_dereg(&src_mr));
    EX_CHECK(rpma_peer_delete(&peer));
    free(src);
    return 0;
}
