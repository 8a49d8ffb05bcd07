#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""idle_ticker_smoke.py THREAD_CPU LIBIDLE_TICKER -- `sleep 0.3` under the preloaded ticker: with
RPMA_IDLE_TICK_US=1000 the process has a second thread that slept (woke) again and again; without
it, one thread only. No figure is judged beyond that."""
import json
import os
import subprocess
import sys

tool, lib = sys.argv[1:3]


def threads(tick):
    env = dict(os.environ, LD_PRELOAD=lib)
    env.pop("RPMA_IDLE_TICK_US", None)
    if tick:
        env["RPMA_IDLE_TICK_US"] = "1000"
    r = subprocess.run([sys.executable, tool, "--json", "--", "sleep", "0.3"], env=env,
                       capture_output=True, text=True, timeout=30)
    j = json.loads(r.stdout.strip().splitlines()[-1])
    if j["rc"]:
        sys.exit(f"FAIL: sleep under the ticker exited {j['rc']}: {r.stderr.strip()}")
    return j["threads"]


bad = []
on, off = threads(True), threads(False)
extra = [t for t in on if t["tid"] != t["pid"]]
if len(on) != 2 or len(extra) != 1:
    bad.append(f"with the ticker: {len(on)} threads, expected 2: {on}")
elif extra[0]["sleeps"] < 10:
    bad.append(f"the ticker woke {extra[0]['sleeps']} times in 0.3 s")
if len(off) != 1:
    bad.append(f"without RPMA_IDLE_TICK_US: {len(off)} threads, expected 1: {off}")
print(f"ticker: {extra[0]['sleeps'] if extra else '-'} wake-ups in 0.3 s")
for b in bad:
    print("FAIL", b)
sys.exit(1 if bad else 0)
