#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""clock_test.py RPMA_PERF PORT -- rpma-perf --clock: each clock is the one the JSON names, and
a run lasts as long by that clock as by CLOCK_MONOTONIC (rpma-perf reports both spans, taken
side by side, so load does not matter): a miscalibrated counter fails. x86 only for tsc."""
import json
import platform
import subprocess
import sys
import time

perf, port = sys.argv[1], int(sys.argv[2])
failures = []


def run(clock, extra):
    cmd = [perf, "loopback", "--op", "read", "--size", "8", "--port", str(port), "--json",
           "--clock", clock] + extra
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        failures.append(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
        return None, wall
    return json.loads(p.stdout), wall


clocks = ["monotonic", "auto"]
if platform.machine() in ("x86_64", "i386", "i686"):
    clocks.append("tsc")
for clock in clocks:
    j, wall = run(clock, ["--time", "1"])
    if j is None:
        continue
    lat = j["lat_us"]
    want = clock if clock != "auto" else j["clock"]
    if j["clock"] != want or j["clock"] not in ("tsc", "monotonic"):
        failures.append(f"--clock {clock}: the JSON says clock {j['clock']!r}")
    if not (0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"]):
        failures.append(f"--clock {clock}: latencies out of order: {lat}")
    # the run itself: about 1 s by rpma-perf's clock; the process lived longer than that
    if j["seconds"] > wall:
        failures.append(f"--clock {clock}: the run took {j['seconds']:.3f} s by its clock, the "
                        f"process only {wall:.3f} s")
    mono = j["seconds_monotonic"]
    if abs(j["seconds"] - mono) > 0.01 * mono + 0.001:
        failures.append(f"--clock {clock}: the run took {j['seconds']:.4f} s by its clock, "
                        f"{mono:.4f} s by CLOCK_MONOTONIC")
    if j["seconds"] < 0.9:
        failures.append(f"--clock {clock}: a 1 s run stopped after {j['seconds']:.3f} s")
    print(f"--clock {clock}: clock {j['clock']}, run {j['seconds']:.3f} s, process {wall:.3f} s, "
          f"p50 {lat['p50']} us")

bad = subprocess.run([perf, "loopback", "--op", "read", "--clock", "bogus"], capture_output=True,
                     text=True, timeout=30)
if bad.returncode != 2 or "bad value for --clock" not in bad.stderr:
    failures.append(f"--clock bogus: exit {bad.returncode}, stderr {bad.stderr.strip()!r}")

for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
