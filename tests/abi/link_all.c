/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * link_all.c -- proves that a C11 program including only <librpma.h> can reference every one of
 * the 84 public functions and link them from the shared library, and that the library behind
 * them is live: a few calls that need no transport must reject bad arguments with RPMA_E_INVAL.
 *
 * Usage: link_all [expected_symbols.txt]
 * With the list, the program also checks that its table names exactly the listed functions.
 */
#include <librpma.h>

typedef void (*any_fn)(void);

struct entry {
    const char *name;
    any_fn fn;
};

#define E(f) \
    { #f, (any_fn)f }

/* every public function; the linker must resolve each one from librpma.so.0 */
static const struct entry table[] = {
    E(rpma_atomic_write),
    E(rpma_conn_apply_remote_peer_cfg),
    E(rpma_conn_cfg_delete),
    E(rpma_conn_cfg_get_compl_channel),
    E(rpma_conn_cfg_get_cq_size),
    E(rpma_conn_cfg_get_rcq_size),
    E(rpma_conn_cfg_get_rq_size),
    E(rpma_conn_cfg_get_sq_size),
    E(rpma_conn_cfg_get_srq),
    E(rpma_conn_cfg_get_timeout),
    E(rpma_conn_cfg_new),
    E(rpma_conn_cfg_set_compl_channel),
    E(rpma_conn_cfg_set_cq_size),
    E(rpma_conn_cfg_set_rcq_size),
    E(rpma_conn_cfg_set_rq_size),
    E(rpma_conn_cfg_set_sq_size),
    E(rpma_conn_cfg_set_srq),
    E(rpma_conn_cfg_set_timeout),
    E(rpma_conn_delete),
    E(rpma_conn_disconnect),
    E(rpma_conn_get_compl_fd),
    E(rpma_conn_get_cq),
    E(rpma_conn_get_event_fd),
    E(rpma_conn_get_private_data),
    E(rpma_conn_get_qp_num),
    E(rpma_conn_get_rcq),
    E(rpma_conn_next_event),
    E(rpma_conn_req_connect),
    E(rpma_conn_req_delete),
    E(rpma_conn_req_get_private_data),
    E(rpma_conn_req_new),
    E(rpma_conn_req_recv),
    E(rpma_conn_wait),
    E(rpma_cq_get_fd),
    E(rpma_cq_get_wc),
    E(rpma_cq_wait),
    E(rpma_ep_get_fd),
    E(rpma_ep_listen),
    E(rpma_ep_next_conn_req),
    E(rpma_ep_shutdown),
    E(rpma_err_2str),
    E(rpma_flush),
    E(rpma_log_get_threshold),
    E(rpma_log_set_function),
    E(rpma_log_set_threshold),
    E(rpma_mr_advise),
    E(rpma_mr_dereg),
    E(rpma_mr_get_descriptor),
    E(rpma_mr_get_descriptor_size),
    E(rpma_mr_get_ptr),
    E(rpma_mr_get_size),
    E(rpma_mr_reg),
    E(rpma_mr_remote_delete),
    E(rpma_mr_remote_from_descriptor),
    E(rpma_mr_remote_get_flush_type),
    E(rpma_mr_remote_get_size),
    E(rpma_peer_cfg_delete),
    E(rpma_peer_cfg_from_descriptor),
    E(rpma_peer_cfg_get_descriptor),
    E(rpma_peer_cfg_get_descriptor_size),
    E(rpma_peer_cfg_get_direct_write_to_pmem),
    E(rpma_peer_cfg_new),
    E(rpma_peer_cfg_set_direct_write_to_pmem),
    E(rpma_peer_delete),
    E(rpma_peer_new),
    E(rpma_read),
    E(rpma_recv),
    E(rpma_send),
    E(rpma_send_with_imm),
    E(rpma_srq_cfg_delete),
    E(rpma_srq_cfg_get_rcq_size),
    E(rpma_srq_cfg_get_rq_size),
    E(rpma_srq_cfg_new),
    E(rpma_srq_cfg_set_rcq_size),
    E(rpma_srq_cfg_set_rq_size),
    E(rpma_srq_delete),
    E(rpma_srq_get_rcq),
    E(rpma_srq_new),
    E(rpma_srq_recv),
    E(rpma_utils_conn_event_2str),
    E(rpma_utils_get_ibv_context),
    E(rpma_utils_ibv_context_is_odp_capable),
    E(rpma_write),
    E(rpma_write_with_imm),
};

#define TABLE_LEN (sizeof(table) / sizeof(table[0]))

static int failures;

static int str_eq(const char *a, const char *b) {
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

static void expect(int cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "FAIL: %s\n", what);
        failures++;
    }
}

#define EXPECT_RET(call, want) expect((call) == (want), #call " == " #want)

/* compares the table with the list file: same names, no duplicates */
static void check_list(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "FAIL: cannot open %s\n", path);
        failures++;
        return;
    }
    int seen[TABLE_LEN] = {0};
    size_t listed = 0;
    char line[128];
    while (fgets(line, sizeof(line), f)) {
        size_t n = 0;
        while (line[n] && line[n] != '\n' && line[n] != '\r') n++;
        line[n] = '\0';
        if (n == 0) continue;
        listed++;
        size_t i = 0;
        while (i < TABLE_LEN && !str_eq(table[i].name, line)) i++;
        if (i == TABLE_LEN) {
            fprintf(stderr, "FAIL: %s is listed but not referenced\n", line);
            failures++;
        } else if (seen[i]++) {
            fprintf(stderr, "FAIL: %s is listed twice\n", line);
            failures++;
        }
    }
    fclose(f);
    for (size_t i = 0; i < TABLE_LEN; i++) {
        if (!seen[i]) {
            fprintf(stderr, "FAIL: %s is referenced but not listed\n", table[i].name);
            failures++;
        }
    }
    if (listed != TABLE_LEN) {
        fprintf(stderr, "FAIL: %zu names listed, %zu referenced\n", listed, TABLE_LEN);
        failures++;
    }
}

/* calls that need no transport: argument checks and plain configuration objects */
static void check_calls(void) {
    EXPECT_RET(rpma_conn_cfg_new(NULL), RPMA_E_INVAL);
    EXPECT_RET(rpma_peer_cfg_new(NULL), RPMA_E_INVAL);
    EXPECT_RET(rpma_srq_cfg_new(NULL), RPMA_E_INVAL);
    EXPECT_RET(rpma_peer_new(NULL, NULL), RPMA_E_INVAL);
    EXPECT_RET(rpma_cq_get_wc(NULL, 1, NULL, NULL), RPMA_E_INVAL);
    EXPECT_RET(rpma_flush(NULL, NULL, 0, 0, RPMA_FLUSH_TYPE_VISIBILITY, 0, NULL), RPMA_E_INVAL);
    EXPECT_RET(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_MAX, RPMA_LOG_LEVEL_ERROR), RPMA_E_INVAL);

    /* a descriptor shorter than 21 bytes cannot be decoded */
    char desc[4] = {0};
    struct rpma_mr_remote *rmr = NULL;
    EXPECT_RET(rpma_mr_remote_from_descriptor(desc, sizeof(desc), &rmr), RPMA_E_INVAL);
    expect(rmr == NULL, "a failed decode leaves *mr_ptr alone");

    struct rpma_conn_cfg *cfg = NULL;
    EXPECT_RET(rpma_conn_cfg_new(&cfg), 0);
    expect(cfg != NULL, "rpma_conn_cfg_new gives an object");
    if (cfg) {
        int timeout = 0;
        EXPECT_RET(rpma_conn_cfg_get_timeout(cfg, &timeout), 0);
        expect(timeout == RPMA_DEFAULT_TIMEOUT_MS, "default timeout is 1000 ms");
        EXPECT_RET(rpma_conn_cfg_set_timeout(cfg, -1), RPMA_E_INVAL);
        EXPECT_RET(rpma_conn_cfg_delete(&cfg), 0);
        expect(cfg == NULL, "rpma_conn_cfg_delete clears the pointer");
    }
    EXPECT_RET(rpma_conn_cfg_delete(&cfg), 0);

    const char *s = rpma_err_2str(RPMA_E_INVAL);
    expect(s != NULL && s[0] != '\0', "rpma_err_2str(RPMA_E_INVAL) describes the error");
    s = rpma_utils_conn_event_2str(RPMA_CONN_ESTABLISHED);
    expect(s != NULL && s[0] != '\0', "rpma_utils_conn_event_2str names ESTABLISHED");
}

int main(int argc, char *argv[]) {
    for (size_t i = 0; i < TABLE_LEN; i++) expect(table[i].fn != NULL, table[i].name);
    if (argc > 1) check_list(argv[1]);
    check_calls();
    if (failures) {
        fprintf(stderr, "link_all: %d check(s) failed\n", failures);
        return 1;
    }
    printf("link_all: %zu functions linked, argument checks OK\n", TABLE_LEN);
    return 0;
}
