#!/usr/bin/env python3
"""An SRQ post while N connections wait on it, this build against another librpma: bench/srq_herd
runs alternately on each library (LD_LIBRARY_PATH), --rounds times per row.

    bench/srq_herd_ab.py --build build --baseline-lib DIR [--connections 1000] [--rounds 3]
                         [--out FILE]

Rows: receives posted one at a time with a gap of 0, 100 and 1000 us after each completion, and
all at once. Prints the medians of the time per receive and of the server's CPU time, and their
ratios (this build over the baseline), and writes JSON with every sample.
"""
import argparse
import json
import os
import statistics
import subprocess

ROWS = [("one, gap 0", ["--mode", "one", "--gap-us", "0"]),
        ("one, gap 100us", ["--mode", "one", "--gap-us", "100"]),
        ("one, gap 1ms", ["--mode", "one", "--gap-us", "1000"]),
        ("batch", ["--mode", "batch"])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--baseline-lib", required=True, help="folder with the other librpma.so.0")
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    herd = os.path.join(a.build, "bench/srq_herd")
    libs = [("rpma", os.path.abspath(a.build)), ("base", os.path.abspath(a.baseline_lib))]
    samples = {}
    port = 47950
    for r in range(a.rounds):
        for name, args in ROWS:
            for lib, path in libs[::1 if r % 2 == 0 else -1]:  # alternate which goes first
                port += 40
                env = dict(os.environ, LD_LIBRARY_PATH=path)
                cmd = [herd, "--connections", str(a.connections), "--settle", "0.5",
                       "--port", str(port)] + args
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900,
                                     check=True).stdout
                j = json.loads(out.strip().splitlines()[-1])
                s = samples.setdefault(name, {}).setdefault(lib, {"us_per_recv": [], "cpu_s": []})
                s["us_per_recv"].append(j["us_per_recv"])
                s["cpu_s"].append(j["server_cpu_s"])
    result = {"connections": a.connections, "rounds": a.rounds, "rows": {}}
    print(f"{a.connections} connections on one SRQ, medians of {a.rounds}: us per receive and the "
          "server's CPU seconds for all of them")
    for name, args in ROWS:
        by = samples[name]
        med = {lib: {k: statistics.median(v) for k, v in m.items()} for lib, m in by.items()}
        ratio = {k: round(med["rpma"][k] / med["base"][k], 3) for k in med["rpma"]}
        result["rows"][name] = {"args": args, "median": med, "rpma_over_base": ratio,
                                "samples": by}
        print(f"{name:15} rpma {med['rpma']['us_per_recv']:8.1f} us {med['rpma']['cpu_s']:7.3f} s"
              f"   base {med['base']['us_per_recv']:8.1f} us {med['base']['cpu_s']:7.3f} s"
              f"   {ratio['us_per_recv']:.2f}x time {ratio['cpu_s']:.2f}x CPU")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
