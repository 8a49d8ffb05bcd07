#!/usr/bin/env python3
"""server_output_test.py RPMA_PERF PORT -- `rpma-perf server` prints what a user should act on.

Runs a server on 127.0.0.1:PORT and, one after the other, clients of a one-sided operation
(write), a message operation (send) and an answered one (gpspm), each for a fixed count. Every
session must end with a summary that fits its operation (no "0 messages" for writes), and the
receives flushed by each normal disconnect must not be reported ("completion status").
No timing: each wait is for a line or an exit, bounded only as a backstop.
"""
import re
import signal
import subprocess
import sys
import time

perf, port = sys.argv[1], sys.argv[2]
OPS = {
    "write": r"write done in .*one-sided",
    # 100 operations and the client's warm-up ones
    "send": r"send done in .*; 1\d\d messages, .* MiB received",
    "gpspm": r"gpspm done in .*; 1\d\d requests answered",
}


def wait_for(proc, out, pattern, what):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line:
            out.append(line)
            if re.search(pattern, line):
                return
        elif proc.poll() is not None:
            break
    sys.exit("FAIL: no line /%s/ (%s); the server said:\n%s" % (pattern, what, "".join(out)))


srv = subprocess.Popen([perf, "server", "--addr", "127.0.0.1", "--port", port],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
out = []
try:
    wait_for(srv, out, r"listening on", "start")
    for op, summary in OPS.items():
        c = subprocess.run([perf, "client", "--addr", "127.0.0.1", "--port", port, "--op", op,
                            "--count", "100"], capture_output=True, text=True, timeout=60)
        if c.returncode != 0:
            sys.exit("FAIL: client --op %s exited %d:\n%s" % (op, c.returncode, c.stderr))
        wait_for(srv, out, summary, "the summary of the %s session" % op)
    srv.send_signal(signal.SIGINT)
    rest, _ = srv.communicate(timeout=60)
    out.append(rest)
finally:
    if srv.poll() is None:
        srv.kill()
        srv.wait()
text = "".join(out)
print(text, end="")
bad = [l for l in text.splitlines() if re.search(r"completion status|\b0 messages|left mid-run", l)]
if srv.returncode != 0:
    bad.append("the server exited %d" % srv.returncode)
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
