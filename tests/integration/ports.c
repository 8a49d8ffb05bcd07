/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ports.c -- a port that is no port number is refused (issue 19).
 *
 * rpma-only expectation, NOT part of the black-box suite run on the reference: the reference
 * librpma takes "70000" as port 4464 (librdmacm truncates it), listens there and connects there.
 * rpma refuses it on purpose (docs/tcp-provider.md, "Ports"):
 * rpma_ep_listen and rpma_conn_req_new give RPMA_E_INVAL for a numeric port above 65535 and for
 * any port text that getaddrinfo would read as a number without being a plain decimal one
 * ("-1" would be 65535, "" port 0). A single process: nothing is connected.
 *
 * args: client ADDR PORT, PORT a free port that must still work
 */
#define _GNU_SOURCE
#include <string.h>

#include "common.h"

static const char *const g_bad[] = {
    "70000",                /* above 65535: would be 70000 % 65536 = 4464 */
    "65536",                /* would be port 0 */
    "99999999999999999999", /* overflows an unsigned long */
    "-1",                   /* would be 65535 */
    "",                     /* would be port 0 */
    " 80",                  /* leading blank */
    "+80",                  /* sign */
    "80 ",                  /* trailing blank */
    "0x50",                 /* not decimal */
    "12ab",                 /* digits, then garbage */
};
#define N_BAD (sizeof(g_bad) / sizeof(g_bad[0]))

int main(int argc, char *argv[]) {
    struct it_args a;
    it_init(argc, argv, &a);
    struct rpma_peer *peer = it_peer_new(a.addr, true);

    for (size_t i = 0; i < N_BAD; i++) {
        struct rpma_ep *ep = NULL;
        int ret = rpma_ep_listen(peer, a.addr, g_bad[i], &ep);
        if (ret != RPMA_E_INVAL)
            IT_FAIL("rpma_ep_listen(port \"%s\") returned %d (%s), expected RPMA_E_INVAL", g_bad[i],
                    ret, rpma_err_2str(ret));
        CHECK(ep == NULL);
        struct rpma_conn_req *req = NULL;
        ret = rpma_conn_req_new(peer, a.addr, g_bad[i], NULL, &req);
        if (ret != RPMA_E_INVAL)
            IT_FAIL("rpma_conn_req_new(port \"%s\") returned %d (%s), expected RPMA_E_INVAL",
                    g_bad[i], ret, rpma_err_2str(ret));
        CHECK(req == NULL);
    }

    /* a service name nobody knows cannot be resolved: RPMA_E_PROVIDER, as before */
    struct rpma_conn_req *req = NULL;
    CHECK_ERR(rpma_conn_req_new(peer, a.addr, "no-such-rpma-service", NULL, &req), RPMA_E_PROVIDER);
    CHECK(req == NULL);

    /* the edges of the range still work (rpma_conn_req_new only resolves) */
    CHECK_OK(rpma_conn_req_new(peer, a.addr, "65535", NULL, &req));
    CHECK_OK(rpma_conn_req_delete(&req));
    CHECK_OK(rpma_conn_req_new(peer, a.addr, "00080", NULL, &req));
    CHECK_OK(rpma_conn_req_delete(&req));
    struct rpma_ep *ep = NULL;
    CHECK_OK(rpma_ep_listen(peer, a.addr, a.port, &ep));
    CHECK_OK(rpma_ep_shutdown(&ep));

    CHECK_OK(rpma_peer_delete(&peer));
    return 0;
}
