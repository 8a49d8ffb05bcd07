#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""lat_probe_smoke.py LAT_PROBE OP PORT -- lat_probe's server and client once over 127.0.0.1: both
exit 0 and the client prints its one line of figures in order (p50 <= p99). No figure is judged."""
import re
import subprocess
import sys

probe, op, port = sys.argv[1], sys.argv[2], sys.argv[3]
srv = subprocess.Popen([probe, "server", "127.0.0.1", port], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
try:
    line = srv.stdout.readline()
    if line.strip() != "listening":
        srv.wait(timeout=30)
        sys.exit(f"FAIL: the server did not listen (exit {srv.returncode}): "
                 f"{srv.stderr.read().strip()}")
    cl = subprocess.run([probe, "client", "127.0.0.1", port, op, "500"], capture_output=True,
                        text=True, timeout=40)
    rc = srv.wait(timeout=30)
finally:
    if srv.poll() is None:
        srv.kill()
        srv.wait()
print(cl.stdout.strip())
m = re.fullmatch(rf"{re.escape(op)} 8 B: p50 ([0-9.]+) us  p99 ([0-9.]+) us  mean ([0-9.]+) us  "
                 r"\(500 round trips\)", cl.stdout.strip())
bad = []
if cl.returncode != 0:
    bad.append(f"client exit {cl.returncode}: {cl.stderr.strip()}")
if rc != 0:
    bad.append(f"server exit {rc}: {srv.stderr.read().strip()}")
if not m:
    bad.append(f"client output not as expected: {cl.stdout!r}")
elif not 0 < float(m.group(1)) <= float(m.group(2)):
    bad.append(f"p50 {m.group(1)} and p99 {m.group(2)} out of order")
for b in bad:
    print("FAIL", b)
sys.exit(1 if bad else 0)
