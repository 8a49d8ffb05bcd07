#!/usr/bin/env python3
"""Per-thread CPU of a benchmark command: which thread would limit it where cores are plenty.

On 2 cores every thread shares the same CPUs, so a run's rate says little about a machine with
16: there each thread has a core, and the rate is bounded by the busiest one. This runs CMD,
samples /proc/<pid>/task/<tid>/stat of it and its descendants every --interval seconds, and
prints each thread's CPU seconds (user+system) and how often it slept (voluntary context
switches: each is a wake-up, which costs an IPI between vCPUs of a VM) or was preempted, with
CPU seconds per GiB where --bytes or the command's JSON (`bytes`, or `ops` x `size`) says how
much it moved, and sleeps per operation where the JSON has `ops`. It reads only /proc, so it
runs where `perf` is missing (the device machine).

    bench/thread_cpu.py [--interval S] [--bytes N] -- CMD ARGS...

A thread's last sample is its figure, so a thread that exits loses up to one interval.
"""
import argparse
import json
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def descendants(root):
    """root and every live process below it"""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
        except OSError:
            continue
        ppid = int(s[s.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def sample(root, seen):
    for pid in descendants(root):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    s = f.read()
            except OSError:
                continue
            comm = s[s.index("(") + 1:s.rindex(")")]
            rest = s[s.rindex(")") + 2:].split()
            cpu = (int(rest[11]) + int(rest[12])) / TICK  # utime, stime
            sw = [0, 0]
            try:
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches"):
                            sw[0] = int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches"):
                            sw[1] = int(line.split()[1])
            except OSError:
                pass
            seen[(pid, int(tid))] = (comm, cpu, sw[0], sw[1])


def figures(text):
    """bytes moved and operations done, from the last JSON object the command printed"""
    for line in reversed(text.strip().splitlines()):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if isinstance(j, dict) and ("bytes" in j or "ops" in j):
            ops = j.get("ops")
            nbytes = j.get("bytes") or (ops * j["size"] if ops and "size" in j else None)
            return nbytes, ops
    return None, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interval", type=float, default=0.02)
    ap.add_argument("--bytes", type=int)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command")
    seen = {}
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    while p.poll() is None:
        sample(p.pid, seen)
        time.sleep(a.interval)
    out = p.stdout.read()
    nbytes, ops = figures(out)
    nbytes = a.bytes or nbytes
    threads = sorted(({"pid": k[0], "tid": k[1], "comm": v[0], "cpu_s": v[1], "sleeps": v[2],
                       "preempted": v[3]}
                      for k, v in seen.items()), key=lambda t: -t["cpu_s"])
    gib = nbytes / 2**30 if nbytes else None
    for t in threads:
        t["cpu_s_per_GiB"] = round(t["cpu_s"] / gib, 4) if gib else None
    if a.json:
        print(json.dumps({"cmd": cmd, "rc": p.returncode, "bytes": nbytes, "ops": ops,
                          "threads": threads}))
    else:
        print(f"rc {p.returncode}, {nbytes} bytes" + (f" ({gib:.2f} GiB)" if gib else "") +
              (f", {ops} operations" if ops else ""))
        for t in threads:
            if t["cpu_s"] > 0:
                per = f"{t['cpu_s_per_GiB']:8.3f} s/GiB" if gib else ""
                per_op = f" ({t['sleeps'] / ops:.2f} per operation)" if ops else ""
                print(f"{t['pid']:>8} {t['tid']:>8} {t['comm']:<16} {t['cpu_s']:7.2f} s {per}"
                      f" {t['sleeps']:>8} sleeps{per_op} {t['preempted']:>7} preempted")
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
