#!/usr/bin/env python3
"""check_error_line.py -- a tool's error for a port in use or a bad address is one plain line.

    check_error_line.py --case port-in-use|bad-address|not-local --port P -- COMMAND ARGS...

In ARGS, {addr} becomes the address of the case and {port} the port. For port-in-use this script
holds 127.0.0.1:P with a listening socket of its own first. COMMAND must fail within 60 s, and
its stderr must be exactly one line that names the cause and holds no source expression (a call
with its arguments, "->", "&", a file:line, "connection -1") nor the bare error-code text.
Loopback only: the bad address fails in the resolver before any lookup ("not an address" has
spaces), and 192.0.2.1 (TEST-NET-1) is never assigned to a local interface.
"""
import argparse
import re
import socket
import subprocess
import sys

CASES = {
    # case: (address, what the line must say)
    "port-in-use": ("127.0.0.1", r"Address already in use"),
    "bad-address": ("not an address", r"cannot resolve 'not an address'"),
    "not-local": ("192.0.2.1", r"no local (RDMA )?device for '192\.0\.2\.1'"),
}
SOURCE_LIKE = [
    (re.compile(r"\w+\([^)]*[,&>][^)]*\)"), "a call with its arguments"),
    (re.compile(r"->"), "'->'"),
    (re.compile(r"&\w"), "'&'"),
    (re.compile(r"\w+\.(c|cc|h):\d+"), "a source file and line"),
    (re.compile(r"connection -1"), "'connection -1'"),
    (re.compile(r"The transport provider reported an error"), "the bare error-code text"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=sorted(CASES), required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    addr, expect = CASES[a.case]
    cmd = [c.replace("{addr}", addr).replace("{port}", str(a.port)) for c in cmd]

    holder = None
    if a.case == "port-in-use":
        holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        holder.bind(("127.0.0.1", a.port))
        holder.listen()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    finally:
        if holder:
            holder.close()
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    print("$ " + " ".join(repr(c) if " " in c else c for c in cmd))
    print("exit status %d; stderr:\n%s" % (r.returncode, r.stderr), end="")
    bad = []
    if r.returncode == 0:
        bad.append("the command succeeded")
    if len(lines) != 1:
        bad.append("stderr has %d lines, not 1" % len(lines))
    if not any(re.search(expect, l) for l in lines):
        bad.append("no line says /%s/" % expect)
    for l in lines:
        for rx, what in SOURCE_LIKE:
            if rx.search(l):
                bad.append("%s in %r" % (what, l))
    for b in bad:
        print("FAIL: " + b)
    if not bad:
        print("ok: one plain line with the cause")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
