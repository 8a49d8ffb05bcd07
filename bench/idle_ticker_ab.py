#!/usr/bin/env python3
"""Blocking round trips with and without an idle ticker: how much of a row is the wake-up of idle
vCPUs rather than work. Each row runs alternately plain and with libidle_ticker.so preloaded
(RPMA_IDLE_TICK_US=1000: a thread that only sleeps 1 ms at a time), --rounds times, 2 s each.

    bench/idle_ticker_ab.py --build build [--rounds 6] [--out FILE]

Rows: rpma's blocking write+flush, GPSPM and send/recv (rpma-perf loopback, tcp) and the
two-message raw TCP floor (tcp_peer lat --messages 2). Prints the p50 medians and writes JSON.
"""
import argparse
import json
import os
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--time", default="2")
    ap.add_argument("--out")
    a = ap.parse_args()
    perf = os.path.join(a.build, "tools/rpma-perf/rpma-perf")
    tcp = os.path.join(a.build, "bench/tcp_peer")
    lib = os.path.abspath(os.path.join(a.build, "bench/libidle_ticker.so"))
    rows = {f"rpma {op}": [perf, "loopback", "--time", a.time, "--json", "--provider", "tcp",
                           "--op", op, "--size", "8", "--iodepth", "1", "--port"]
            for op in ("write-flush", "gpspm", "send-recv")}
    rows["tcp-2msg"] = [tcp, "lat", "--size", "8", "--messages", "2", "--time", a.time, "--port"]
    variants = [("plain", {}), ("ticker", {"LD_PRELOAD": lib, "RPMA_IDLE_TICK_US": "1000"})]
    samples = {}
    port = 52400
    for r in range(a.rounds):
        for name, cmd in rows.items():
            for var, extra in variants[::1 if r % 2 == 0 else -1]:  # alternate which goes first
                port += 1
                env = dict(os.environ, **extra)
                out = subprocess.run(cmd + [str(port)], env=env, capture_output=True, text=True,
                                     timeout=120, check=True).stdout
                p50 = json.loads(out.strip().splitlines()[-1])["lat_us"]["p50"]
                samples.setdefault(name, {}).setdefault(var, []).append(round(p50, 2))
    result = {"rounds": a.rounds, "seconds": float(a.time), "ticker_us": 1000, "rows": {}}
    for name, by in samples.items():
        med = {v: statistics.median(s) for v, s in by.items()}
        result["rows"][name] = {"p50_us_median": med, "samples": by, "command": rows[name],
                                "ticker_over_plain": round(med["ticker"] / med["plain"], 3)}
        print(f"{name:18} plain {med['plain']:6.1f} us  ticker {med['ticker']:6.1f} us  "
              f"{med['ticker'] / med['plain']:.2f}x")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
