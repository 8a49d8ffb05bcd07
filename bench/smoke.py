#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""smoke.py RPMA_PERF TCP_PEER OUTDIR [uring] -- a short run.py over rpma, raw TCP and the
two-message TCP floor (write+flush, blocking): every peer gives a figure, tcp-2msg runs tcp_peer
with --messages 2, and tcp_peer refuses a bad --messages. Then server_modes.py runs every
--server mode of tcp_peer once per case (the io_uring ones too where the build says `uring`), and
tcp_peer refuses an unknown or bw --server. Timing is never checked."""
import json
import os
import subprocess
import sys

perf, tcp, outdir = sys.argv[1:4]
uring = sys.argv[4:] == ["uring"]
here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(outdir, "bench_smoke.json")
subprocess.run([sys.executable, os.path.join(here, "run.py"), "--perf", perf, "--tcp", tcp,
                "--peers", "rpma,tcp,tcp-2msg", "--cases", "lat_blocking,write_4k", "--runs", "1",
                "--time", "0.3", "--out", out], check=True, timeout=120)
res = {c["case"]: c for c in json.load(open(out))["cases"]}
lat, bw = res["lat_blocking"], res["write_4k"]
for peer in ("rpma", "tcp", "tcp-2msg"):
    assert lat["median"][peer] and lat["median"][peer] > 0, (peer, lat["median"])
    assert lat["p99_us"][peer] >= lat["median"][peer], (peer, lat["p99_us"])
assert "--messages 2" in lat["commands"]["tcp-2msg"], lat["commands"]
assert bw["median"]["tcp-2msg"] is None, "tcp-2msg is a write+flush floor only"
assert lat["ratios_rpma_to"]["tcp-2msg"] > 0
j = json.loads(subprocess.run([tcp, "lat", "--messages", "3", "--time", "0.2", "--port", "47950"],
                              check=True, capture_output=True, text=True, timeout=60).stdout)
assert j["messages"] == 3 and j["ops"] > 0, j
for bad in (["lat", "--messages", "0"], ["lat", "--messages", "65"], ["bw", "--messages", "2"]):
    r = subprocess.run([tcp] + bad + ["--time", "0.2"], capture_output=True, timeout=60)
    assert r.returncode == 2, (bad, r.returncode)
assert "server" not in j, "the default JSON stays as it was"
sys.path.insert(0, here)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import server_modes  # noqa: E402

modes = [m for m in server_modes.MODES if uring or not m.startswith("uring")]
table = subprocess.run([sys.executable, os.path.join(here, "server_modes.py"), "--tcp", tcp,
                        "--rounds", "1", "--time", "0.05", "--modes", ",".join(modes)],
                       check=True, capture_output=True, text=True, timeout=300).stdout
for m in modes:
    rows = [ln for ln in table.splitlines() if ln.startswith(f"| {m} |")]
    assert len(rows) == len(server_modes.CASES), (m, table)
for bad in (["lat", "--server", "none"], ["bw", "--server", "epoll"]):
    r = subprocess.run([tcp] + bad + ["--time", "0.2"], capture_output=True, timeout=60)
    assert r.returncode == 2, (bad, r.returncode)
print("bench smoke: ok")
