#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""verbs_probe.py -- the library's own latency on an RDMA device, without rpma-perf: bench/lat_probe
(the smallest librpma loop) on rpma and on upstream librpma (Debian's librpma0, swapped in by
LD_LIBRARY_PATH: the same binary), beside perftest's ib_read_lat and ib_send_lat (-R), rounds
alternating. Prints the p50 of each round and the ratios of the medians.

    python3 bench/verbs_probe.py --probe build/bench/lat_probe --addr ADDR [--rounds 3]
        [--iters 30000] [--base-lib DIR] [--json OUT|-]

--base-lib DIR adds a peer "base": the same lat_probe over DIR's librpma.so.0 (another build of
rpma), in the same rounds, for an A/B of two builds.

In the soft-RoCE guest (docs/performance.md gives the command):
    bash tests/guest/guest.sh run --timeout 500 -- \\
        "python3 bench/verbs_probe.py --probe build/bench/lat_probe --addr \\$RPMA_GUEST_ADDR"
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import parse_perftest, reference_lib_dir  # noqa: E402 (shared with bench/run.py)

# op: (tool, run.py's kind for it, what one printed figure is of a round trip)
PERFTEST = {"read": ("ib_read_lat", "readlat", 1), "send-recv": ("ib_send_lat", "sendrecv", 2)}


def reap(srv):
    """a server that is still there after its client is killed"""
    if srv.poll() is None:
        srv.kill()
        srv.wait()


def run_probe(a, op, port, libdir):
    env = dict(os.environ, RPMA_PROVIDER="verbs")
    if libdir:
        env["LD_LIBRARY_PATH"] = libdir
    srv = subprocess.Popen([a.probe, "server", a.addr, str(port)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env)
    try:
        if srv.stdout.readline().strip() != "listening":
            srv.wait(timeout=30)
            raise RuntimeError(f"lat_probe server: {srv.stderr.read().strip()}")
        cl = subprocess.run([a.probe, "client", a.addr, str(port), op, str(a.iters)],
                            capture_output=True, text=True, env=env, timeout=a.timeout)
        srv.wait(timeout=60)
    finally:
        reap(srv)
    if cl.returncode != 0:
        raise RuntimeError(f"lat_probe client: {cl.stderr.strip()}")
    return float(cl.stdout.split("p50 ")[1].split()[0])


def run_perftest(a, op, port):
    tool, kind, k = PERFTEST[op]
    args = ["-R", "-F", "-s", "8", "-n", str(a.iters), "-p", str(port)]
    srv = subprocess.Popen([tool] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(60):  # it listens once its port is bound; the client retries until then
            time.sleep(0.5)
            p = subprocess.run([tool] + args + [a.addr], capture_output=True, text=True,
                               timeout=a.timeout)
            if p.returncode == 0:
                break
        srv.wait(timeout=60)
    finally:
        reap(srv)
    res = parse_perftest(p.stdout, kind) if p.returncode == 0 else None
    if not res:
        raise RuntimeError(f"{tool}: {(p.stderr or p.stdout).strip()[-300:]}")
    return k * res["t_typical"]  # ib_send_lat prints half a round trip


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--probe", required=True)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=30000)
    ap.add_argument("--json", default="")
    ap.add_argument("--base-lib", default="", help="a folder holding another build's librpma.so.0")
    # a client that hangs (ib_read_lat once did in the guest) costs one sample, not the run
    ap.add_argument("--timeout", type=float, default=120, help="seconds per client run")
    a = ap.parse_args()
    if a.base_lib and not os.path.isfile(os.path.join(a.base_lib, "librpma.so.0")):
        ap.error(f"--base-lib {a.base_lib} holds no librpma.so.0")
    ref = reference_lib_dir()
    peers = ["rpma"] + (["base"] if a.base_lib else []) + ["upstream", "perftest"]
    res = {op: {p: [] for p in peers} for op in PERFTEST}
    port = 18500
    for r in range(1, a.rounds + 1):
        for op in PERFTEST:
            for peer in peers:
                port += 1
                if peer == "upstream" and not ref:
                    continue
                lib = {"upstream": ref, "base": a.base_lib}.get(peer)
                try:
                    v = (run_perftest(a, op, port) if peer == "perftest" else
                         run_probe(a, op, port, lib))
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    print(f"  round {r} {op:9} {peer:8} failed, left out: {e}", flush=True)
                    continue
                res[op][peer].append(v)
                print(f"  round {r} {op:9} {peer:8} p50 {v:7.2f} us", flush=True)
    print(f"\nlat_probe (one 8-byte round trip at a time, busy-polling) on {a.addr}: p50 in us, "
          f"medians of {a.rounds} rounds of {a.iters}; upstream = Debian's librpma "
          f"({ref or 'not installed'})" + (f"; base = {a.base_lib}" if a.base_lib else ""))
    print("| op        |   rpma | upstream | perftest | rpma/upstream | rpma/perftest "
          "| rpma/base |")
    print("|-----------|--------|----------|----------|---------------|---------------"
          "|-----------|")
    out = {"addr": a.addr, "rounds": a.rounds, "iters": a.iters, "reference": ref, "cases": {}}
    for op in PERFTEST:
        med = {p: statistics.median(v) if v else None for p, v in res[op].items()}
        if not med["rpma"] or not med["perftest"]:
            print(f"| {op:9} | no {'rpma' if not med['rpma'] else 'perftest'} sample |")
            continue
        ru = med["rpma"] / med["upstream"] if med["upstream"] else None
        rp = med["rpma"] / med["perftest"]
        rb = med["rpma"] / med["base"] if med.get("base") else None
        print(f"| {op:9} | {med['rpma']:6.2f} | {med['upstream'] or 0:8.2f} | "
              f"{med['perftest']:8.2f} | {ru or 0:13.3f} | {rp:13.3f} | "
              f"{f'{rb:9.3f}' if rb else '        -'} |")
        out["cases"][op] = {"p50_us": res[op], "median": med, "rpma_to_upstream": ru,
                            "rpma_to_perftest": rp, "rpma_to_base": rb}
    if a.json == "-":  # the guest's files vanish with it: print it
        print(json.dumps(out, indent=1))
    elif a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
