#!/usr/bin/env python3
"""Writes the hand-made seed corpora of tests/fuzz/corpus/<target>/ (see docs/reliability.md).

Each seed is a valid input, so the fuzzer starts from the parsers' accepting paths rather than
having to discover the magic numbers and the fixed region address first. The layouts follow
src/provider/rc/frame.h and src/provider/tcp/wire.h (protocol version 2) and
src/core/mr_descriptor.cc. Run it again after a wire-format change.
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC = 0x414D5052  # "RPMA"

# The region fuzz_frames registers: 4 KiB at 0x10000000 + 2048, rkey 0x1000, every usage.
RKEY = 0x1000
BASE = 0x10000000 + 2048

# opcodes
WRITE, WRITE_IMM, READ, ATOMIC, FLUSH, SEND, SEND_IMM = 1, 2, 3, 4, 5, 6, 7
ACK, READ_RESP, NAK, DISC = 16, 17, 18, 32
PERSISTENT, ACK_REQ = 0x01, 0x80

# fuzz_frames' first byte picks the parser
RESPONDER, COMPLETER, CLIENT_REPLY = b"\x00", b"\x01", b"\x02"


# Protocol version 2: a 40-byte frame header; ack (the last field) is, on a request, the count of
# the receiver's requests the sender has executed, 0 on answers and disconnects.
VERSION = 2


def frame(op, flags=0, status=0, imm=0, length=0, rkey=0, addr=0, aux=0, payload=b"", ack=0):
    return struct.pack("<BBHIIIQQQ", op, flags, status, imm, length, rkey, addr, aux,
                       ack) + payload


def req(op, length, off=0, flags=0, imm=0, aux=0, payload=None, ack=0):
    if payload is None and op in (WRITE, WRITE_IMM, SEND, SEND_IMM):
        payload = bytes((i * 7 + 1) & 0xFF for i in range(length))
    return frame(op, flags, 0, imm, length, RKEY, BASE + off, aux, payload or b"", ack)


def answer(op, seq, length=0, status=0, payload=b""):
    return frame(op, 0, status, 0, length, 0, 0, seq, payload)


def disc():
    return frame(DISC)


def hello(role, token, qp_num, pdata=b"", version=VERSION, magic=MAGIC):
    return struct.pack("<IHBBQII", magic, version, role, len(pdata), token, qp_num, 0) + pdata.ljust(
        56, b"\0")


def reply(kind, qp_num, pdata=b""):
    return struct.pack("<IBBHI", MAGIC, kind, len(pdata), 0, qp_num) + pdata.ljust(196, b"\0")


def mr_desc(addr, size, rkey, usage):
    return struct.pack("<QQIB", addr, size, rkey, usage)


def seeds():
    s = {}
    f = s.setdefault("fuzz_frames", {})
    # kind 0: the responder executing the peer's requests
    f["resp_write"] = RESPONDER + req(WRITE, 16, 0, ACK_REQ) + disc()
    f["resp_write_end"] = RESPONDER + req(WRITE, 64, 4096 - 64, ACK_REQ) + disc()
    f["resp_write_zero"] = RESPONDER + req(WRITE, 0, 0, ACK_REQ) + disc()
    f["resp_write_big"] = RESPONDER + req(WRITE, 4096, 0, ACK_REQ) + disc()
    f["resp_write_imm"] = RESPONDER + req(WRITE_IMM, 8, 128, ACK_REQ, imm=0xABCD) + disc()
    f["resp_read"] = RESPONDER + req(READ, 64, 256, ACK_REQ) + disc()
    f["resp_atomic"] = RESPONDER + req(ATOMIC, 8, 512, ACK_REQ, aux=0x1122334455667788) + disc()
    f["resp_flush_vis"] = RESPONDER + req(FLUSH, 256, 0, ACK_REQ) + disc()
    f["resp_flush_pers"] = RESPONDER + req(FLUSH, 256, 0, ACK_REQ | PERSISTENT) + disc()
    f["resp_send"] = RESPONDER + req(SEND, 32, 0, ACK_REQ) + disc()
    f["resp_send_imm"] = RESPONDER + req(SEND_IMM, 32, 0, ACK_REQ, imm=7) + disc()
    f["resp_send_long"] = RESPONDER + req(SEND, 1500, 0, ACK_REQ) + disc()  # > 1 KiB buffer
    f["resp_bad_rkey"] = RESPONDER + frame(WRITE, ACK_REQ, 0, 0, 8, RKEY + 1, BASE, 0,
                                           b"\1" * 8) + disc()
    # the responder's side has sent no requests: acknowledging one is a protocol error
    f["resp_ack_unsent"] = RESPONDER + req(WRITE, 16, 0, ACK_REQ, ack=1) + disc()
    f["resp_mix"] = RESPONDER + b"".join([
        req(WRITE, 100, 0), req(WRITE, 100, 100), req(READ, 200, 0),
        req(ATOMIC, 8, 1024, aux=42), req(SEND, 10, 0), req(WRITE_IMM, 4, 2048, imm=1),
        req(FLUSH, 4096, 0, PERSISTENT), req(SEND_IMM, 0, 0, ACK_REQ, imm=9),
        req(READ, 0, 0, ACK_REQ), disc()])
    # kind 1: the completer; fuzz_hooks.cc posted write 16, read 16, flush 16, send 16, read 2048
    f["comp_ack_all"] = COMPLETER + answer(ACK, 1) + answer(READ_RESP, 2, 16, payload=b"r" * 16) + \
        answer(ACK, 4) + answer(READ_RESP, 5, 2048, payload=b"R" * 2048) + disc()
    f["comp_ack_one"] = COMPLETER + answer(ACK, 1) + disc()
    f["comp_read_resp"] = COMPLETER + answer(READ_RESP, 2, 16, payload=bytes(range(16))) + disc()
    f["comp_nak_access"] = COMPLETER + answer(NAK, 1, status=1) + disc()
    f["comp_nak_inval"] = COMPLETER + answer(ACK, 1) + answer(READ_RESP, 2, 16, payload=b"x" * 16) + \
        answer(NAK, 3, status=2) + disc()
    f["comp_nak_op"] = COMPLETER + answer(ACK, 1) + answer(NAK, 2, status=3) + disc()
    f["comp_disc"] = COMPLETER + disc()
    # kind 2: the client's handshake, then its answer stream
    f["reply_accept"] = CLIENT_REPLY + reply(1, 77)
    f["reply_accept_pdata"] = CLIENT_REPLY + reply(1, 78, b"server private data" * 10) + disc()
    f["reply_accept_max"] = CLIENT_REPLY + reply(1, 79, b"\xAA" * 196) + disc()
    f["reply_reject"] = CLIENT_REPLY + reply(2, 0)

    h = s.setdefault("fuzz_hello", {})
    h["main"] = hello(1, 0x0123456789ABCDEF, 5, b"client pdata")
    h["main_max_pdata"] = hello(1, 0x1111, 6, b"\x55" * 56)
    h["join"] = hello(2, 0x2222, 7)
    h["pair"] = hello(1, 0x3333, 8, b"abc") + hello(2, 0x3333, 8)
    h["main_then_frame"] = hello(1, 0x4444, 9) + frame(WRITE, 0, 0, 0, 4, RKEY, BASE, 0, b"abcd")

    d = s.setdefault("fuzz_descriptors", {})
    d["mr_rw"] = mr_desc(0x7F0000001000, 4096, 0xDEADBEEF, 0x09)  # READ_SRC | WRITE_DST
    d["mr_all"] = mr_desc(0x10000800, 1 << 20, 1, 0xFF)
    d["mr_flush_both"] = mr_desc(0x1000, 64, 0x1000, 0x30)  # both flush types
    d["mr_top"] = mr_desc(0xFFFFFFFFFFFFF000, 0x1000, 0x12345678, 0x20)
    d["peer_cfg_on"] = b"\x01"
    d["peer_cfg_off"] = b"\x00"
    return s


def main():
    total = 0
    for target, files in seeds().items():
        out = os.path.join(HERE, "corpus", target)
        os.makedirs(out, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(out, name), "wb") as fh:
                fh.write(data)
            total += len(data)
    print(f"wrote {sum(len(v) for v in seeds().values())} seeds, {total} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
