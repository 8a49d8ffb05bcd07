/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.h -- the tcp provider's wire format as docs/tcp-provider.md states it, written again in C
 * for the raw-socket test clients, and small blocking socket helpers with bounded waits.
 *
 * Deliberately not shared with src/: a test that reused the library's own definitions would not
 * notice if they drifted from the documented format.
 */
#ifndef RPMA_HARD_WIRE_H
#define RPMA_HARD_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define W_MAGIC 0x414d5052u /* "RPMA" little-endian */
#define W_VERSION 2
#define W_HEADER_SIZE 40 /* a frame header since version 2; 32 in version 1 (no ack) */
#define W_ROLE_MAIN 1
#define W_ROLE_JOIN 2
#define W_REPLY_ACCEPT 1
#define W_REPLY_REJECT 2

enum w_op {
    W_OP_WRITE = 1,
    W_OP_WRITE_IMM = 2,
    W_OP_READ = 3,
    W_OP_ATOMIC = 4,
    W_OP_FLUSH = 5,
    W_OP_SEND = 6,
    W_OP_SEND_IMM = 7,
    W_OP_ACK = 16,
    W_OP_READ_RESP = 17,
    W_OP_NAK = 18,
    W_OP_DISCONNECT = 32,
};

#define W_FLAG_PERSISTENT 0x01
#define W_FLAG_ACK_REQ 0x80

#define W_NAK_ACCESS 1
#define W_NAK_INVALID 2
#define W_NAK_OPERATION 3

#define W_MAX_LEN (1u << 30)

struct w_hello {
    uint32_t magic;
    uint16_t version;
    uint8_t role;
    uint8_t pdata_len;
    uint64_t token;
    uint32_t qp_num;
    uint32_t reserved;
    uint8_t pdata[56];
};
_Static_assert(sizeof(struct w_hello) == 80, "Hello is 80 bytes");

struct w_reply {
    uint32_t magic;
    uint8_t kind;
    uint8_t pdata_len;
    uint16_t reserved;
    uint32_t qp_num;
    uint8_t pdata[196];
};
_Static_assert(sizeof(struct w_reply) == 208, "Reply is 208 bytes");

/*
 * A frame header. ack (version 2) is, on a request (ops 1..7), the cumulative count of the
 * receiver's requests that the sender has executed (0: none yet); the receiver applies it as an
 * acknowledgement before the frame, and one above the number of requests it has sent is a
 * protocol error (LOST). On answers and disconnects it is 0 and ignored. A version 1 header is
 * the first 32 bytes.
 */
struct w_frame {
    uint8_t op;
    uint8_t flags;
    uint16_t status;
    uint32_t imm;
    uint32_t length;
    uint32_t rkey;
    uint64_t addr;
    uint64_t aux;
    uint64_t ack;
};
_Static_assert(sizeof(struct w_frame) == W_HEADER_SIZE, "a frame header is 40 bytes");

/*
 * The protocol version this process speaks: W_VERSION, unless RPMA_TEST_WIRE_VERSION=1 asks for
 * version 1 (to point a raw client at a library from before version 2; by hand only, no ctest
 * sets it). Hellos carry it; frame headers are w_header_size() bytes long.
 */
int w_version(void);
size_t w_header_size(void);

/* a decoded 21-byte MR descriptor */
struct w_mr {
    uint64_t addr;
    uint64_t len;
    uint32_t rkey;
    uint8_t usage;
};
void w_mr_decode(const uint8_t *desc, struct w_mr *mr);

/* random bytes (getrandom) */
void w_random(void *buf, size_t len);
uint64_t w_random64(void);

/* a blocking TCP connection to addr:port within timeout_ms; -1 on failure (errno kept) */
int w_connect(const char *addr, const char *port, int timeout_ms);
/* closes with RST instead of FIN */
void w_close_rst(int fd);

/* writes all bytes (MSG_NOSIGNAL); false if the peer is gone */
bool w_send_all(int fd, const void *buf, size_t len);
/* reads exactly len bytes within timeout_ms; 1 done, 0 EOF/reset first, -1 timeout */
int w_recv_exact(int fd, void *buf, size_t len, int timeout_ms);
/*
 * Waits until the peer closes fd (EOF or reset), discarding whatever arrives; returns the
 * milliseconds it took, or -1 if it is still open after timeout_ms.
 */
long w_wait_closed(int fd, int timeout_ms);

/* a Hello for role with token and pdata_len zero bytes of private data */
void w_hello_init(struct w_hello *h, uint8_t role, uint64_t token);

/* a connection made by hand: both streams, the accept reply, the server's regions */
struct w_conn {
    int main_fd, join_fd;
    struct w_reply reply;
    struct w_mr mr; /* the all-usage region (descriptor at pdata 0) */
    struct w_mr ro; /* the READ_SRC-only region (descriptor at pdata 21) */
};
/* opens a connection by hand and requires an accept; fails the test otherwise */
void w_conn_open(struct w_conn *c, const char *addr, const char *port);
void w_conn_close(struct w_conn *c);

/* sends one frame header (ack 0) plus an optional payload on fd */
bool w_frame_send(int fd, uint8_t op, uint8_t flags, uint32_t length, uint32_t rkey, uint64_t addr,
                  uint64_t aux, const void *payload, size_t payload_len);
/* sends the header *f (w_header_size() bytes of it) plus an optional payload on fd */
bool w_frame_send_hdr(int fd, const struct w_frame *f, const void *payload, size_t payload_len);
/* reads one frame header within timeout_ms (fields a version 1 header lacks are 0): as recv_exact
 */
int w_frame_recv(int fd, struct w_frame *f, int timeout_ms);

long long w_now_ms(void);

#endif /* RPMA_HARD_WIRE_H */
