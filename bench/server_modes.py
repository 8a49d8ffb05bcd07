#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""server_modes.py --tcp TCP_PEER [--rounds N] [--time S] [--modes a,b] [--strace]

The floor's ping-pong (tcp_peer lat, 8 bytes) with each of tcp_peer's --server modes, for the
write+flush floor (--messages 2) and a single message, the client blocking and spinning: the
question of docs/rc-rebuild.md's step (h), whether an io_uring target can beat rpma's epoll
engine. Every round runs every mode once per case, in an order rotated each round, so load that
comes and goes falls on all modes alike. Prints, per case and mode, the median over rounds of p50
and p99 with their spread (min-max), p50 against the blocking server run in the same rounds, and
the server's CPU time (user + system) per round trip.
--strace: instead, runs each mode once under strace -ff and prints the server's system calls per
round trip, by name. Modes this build lacks (no liburing) are skipped with a note.
"""
import argparse
import collections
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

MODES = ["block", "epoll", "epoll-spin", "spin", "uring", "uring-link", "uring-plain", "uring-fixed", "uring-pollfirst",
         "uring-multishot", "uring-sqpoll", "uring-poll"]
CASES = [(2, False), (2, True), (1, False), (1, True)]  # (messages, client spins)


def cmd(tcp, mode, messages, spin, secs, port):
    c = [tcp, "lat", "--size", "8", "--time", str(secs), "--messages", str(messages),
         "--server", mode, "--port", str(port)]
    return c + (["--spin"] if spin else [])


def available(tcp, modes):
    ok = []
    for m in modes:
        r = subprocess.run(cmd(tcp, m, 1, False, 0.05, 48300), capture_output=True, text=True,
                           timeout=60)
        if r.returncode == 0:
            ok.append(m)
        else:
            print(f"server_modes: skipping {m}: {r.stderr.strip()}", file=sys.stderr)
    return ok


def case_name(messages, spin):
    return f"--messages {messages}, client {'spins' if spin else 'blocks'}"


def latency(a, modes):
    res = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in range(a.rounds):
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        for messages, spin in CASES:
            for m in order:
                out = subprocess.run(cmd(a.tcp, m, messages, spin, a.time, 48300), check=True,
                                     capture_output=True, text=True, timeout=a.time + 60).stdout
                j = json.loads(out)
                lat = j["lat_us"]
                cpu = j["server_cpu_s"] * 1e6 / j["ops"]
                res[(messages, spin)][m].append((lat["p50"], lat["p99"], cpu))
        print(f"server_modes: round {r + 1}/{a.rounds}, {os.getloadavg()[0]:.1f} load",
              file=sys.stderr)
    for messages, spin in CASES:
        rows = res[(messages, spin)]
        base = statistics.median(x[0] for x in rows["block"]) if "block" in rows else None
        print(f"\n{case_name(messages, spin)}, {a.rounds} rounds of {a.time} s\n")
        print("| server | p50 us (min-max) | p99 us (min-max) | p50 / block | server CPU us |")
        print("|---|---:|---:|---:|---:|")
        for m in modes:
            p50s, p99s = [x[0] for x in rows[m]], [x[1] for x in rows[m]]
            med = statistics.median(p50s)
            rel = f"{med / base:.2f}x" if base else "-"
            print(f"| {m} | {med:.1f} ({min(p50s):.1f}-{max(p50s):.1f}) | "
                  f"{statistics.median(p99s):.1f} ({min(p99s):.1f}-{max(p99s):.1f}) | {rel} | "
                  f"{statistics.median(x[2] for x in rows[m]):.2f} |")


def syscalls(a, modes):
    call = re.compile(r"^(?:<\.\.\. )?([a-z_0-9]+)[( ]")
    print(f"\nserver system calls per round trip (strace -ff, {a.time} s a run)\n")
    print("| server | case | per round trip | by name |")
    print("|---|---|---:|---|")
    for messages, spin in CASES:
        for m in modes:
            with tempfile.TemporaryDirectory() as d:
                out = subprocess.run(["strace", "-ff", "-qq", "-o", os.path.join(d, "t")] +
                                     cmd(a.tcp, m, messages, spin, a.time, 48300), check=True,
                                     capture_output=True, text=True, timeout=a.time + 120).stdout
                ops = json.loads(out)["ops"]
                # the server is the forked child: the trace that has no execve
                for f in glob.glob(os.path.join(d, "t.*")):
                    text = open(f).read()
                    if text.startswith("execve("):
                        continue
                    names = collections.Counter(
                        mt.group(1) for ln in text.splitlines() if "resumed>" not in ln
                        for mt in [call.match(ln)] if mt)
            total = sum(names.values()) / ops
            by = ", ".join(f"{k} {v / ops:.2f}" for k, v in names.most_common(4) if v >= ops / 100)
            print(f"| {m} | {case_name(messages, spin)} | {total:.2f} | {by} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tcp", required=True, help="bench/tcp_peer")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--time", type=float, default=1.0, help="seconds a run")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--strace", action="store_true")
    a = ap.parse_args()
    modes = available(a.tcp, a.modes.split(","))
    print(f"server_modes: {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}, "
          f"kernel {os.uname().release}")
    (syscalls if a.strace else latency)(a, modes)


if __name__ == "__main__":
    main()
