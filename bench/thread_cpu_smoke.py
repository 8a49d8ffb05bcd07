#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""thread_cpu_smoke.py THREAD_CPU RPMA_PERF PORT -- thread_cpu.py over one short rpma-perf
loopback run: it must see threads of both processes (the client and the server it forks), take
the bytes from rpma-perf's JSON and give every thread its CPU per GiB. No figure is judged."""
import json
import subprocess
import sys

tool, perf, port = sys.argv[1:4]
r = subprocess.run([sys.executable, tool, "--json", "--", perf, "loopback", "--port", port,
                    "--time", "0.5", "--json", "--provider", "tcp", "--op", "write", "--size",
                    "65536", "--iodepth", "4"], capture_output=True, text=True, timeout=120)
bad = []
try:
    j = json.loads(r.stdout.strip().splitlines()[-1])
except (ValueError, IndexError):
    sys.exit(f"FAIL: no JSON (exit {r.returncode}): {r.stdout!r} {r.stderr.strip()}")
th = j["threads"]
if r.returncode or j["rc"]:
    bad.append(f"exit {r.returncode}, rpma-perf {j['rc']}: {r.stderr.strip()}")
if not j["bytes"] or j["bytes"] % 65536:
    bad.append(f"bytes {j['bytes']} not taken from rpma-perf's JSON")
if len({t["pid"] for t in th}) < 2:
    bad.append(f"threads of one process only: {th}")
if not sum(t["cpu_s"] for t in th) > 0:
    bad.append("no CPU time seen")
if any(t["cpu_s_per_GiB"] is None or t["sleeps"] < 0 for t in th):
    bad.append(f"a thread without its figures: {th}")
print(f"{len(th)} threads, {j['bytes']} bytes")
for b in bad:
    print("FAIL", b)
sys.exit(1 if bad else 0)
