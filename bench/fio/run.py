#!/usr/bin/env python3
"""Runs fio's librpma engines as server/client pairs on loopback and prints a table.

Each case starts a server fio (jobs/<engine>-server.fio), waits until it listens, runs the client
fio (jobs/<engine>-client.fio) with --output-format=json, waits for the server to exit, and
checks both: exit status 0, no job error, no sanitizer report, abort or fio error in their
output. Any failure is reported and makes the exit status 1.

A case is ENGINE:MODE:RW:BS:MEM, e.g. apm:async:write:64KiB:file
  ENGINE  apm | gpspm
  MODE    sync (sync=1, iodepth 1) | async (sync=0, iodepth --iodepth)
  RW      write | randwrite | read | randread | rw | randrw  (gpspm: writes only)
  BS      fio block size, e.g. 4KiB
  MEM     dram (filename=malloc) | file (a file in --mem-dir, mapped with libpmem;
          PMEM_IS_PMEM_FORCE=1 lets libpmem accept a file that is not on real PMem)

fio's environment is passed through: LD_LIBRARY_PATH selects another librpma.so.0, LD_PRELOAD and
ASAN_OPTIONS run it over an ASan-built one (see tests/fio/).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

DEFAULT_CASES = (
    [f"{e}:{mo}:write:{bs}:{mem}" for e in ("apm", "gpspm") for mem in ("dram", "file")
     for mo in ("sync", "async") for bs in ("4KiB", "64KiB")]
    + [f"apm:{mo}:read:{bs}:dram" for mo in ("sync", "async") for bs in ("4KiB", "64KiB")]
)

# Output lines the engines print on success.
BENIGN = re.compile(
    r"^(Note: Direct Write to PMem is not supported|Remember that flushing to DRAM"
    r"|fio: size of memory mapped from the file|fio: library used to map PMem"
    r"|Note: having rpma_mr_advise\(3\) failed"
    r"|note: both iodepth >= 1 and synchronous I/O engine are selected)")
# Output that fails a case.
BAD = re.compile(
    r"Sanitizer|runtime error:|Assertion|abort|corrupt|double free|free\(\): invalid"
    r"|Segmentation fault|SIGSEGV|SIGABRT|fio: pid=\d+, err=|io_u error|error|failed"
    r"|terminate called|stack smashing", re.IGNORECASE)


def listening(port):
    """True when something listens on TCP port (IPv4 or IPv6), from /proc/net/tcp*."""
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


def split_output(path):
    """fio --output puts log_err() lines before the JSON: returns (text lines, json or None)."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return [], None
    start = text.find("{\n")
    if start < 0:
        return text.splitlines(), None
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return text.splitlines(), None
    return text[:start].splitlines(), data


def size_bytes(s):
    m = re.fullmatch(r"(\d+)([KMG]i?B?)?", s)
    if not m:
        raise ValueError(s)
    mult = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[(m.group(2) or "")[:1]]
    return int(m.group(1)) * mult


class Case:
    def __init__(self, spec, iodepth):
        parts = spec.split(":")
        if len(parts) != 5:
            raise ValueError(f"case {spec!r}: expected ENGINE:MODE:RW:BS:MEM")
        self.spec = spec
        self.engine, self.mode, self.rw, self.bs, self.mem = parts
        if self.engine not in ("apm", "gpspm"):
            raise ValueError(f"case {spec!r}: engine must be apm or gpspm")
        if self.mode not in ("sync", "async"):
            raise ValueError(f"case {spec!r}: mode must be sync or async")
        if self.mem not in ("dram", "file"):
            raise ValueError(f"case {spec!r}: mem must be dram or file")
        if self.engine == "gpspm" and "write" not in self.rw:
            raise ValueError(f"case {spec!r}: the gpspm engine only writes")
        size_bytes(self.bs)
        self.iodepth = 1 if self.mode == "sync" else iodepth


def run_case(args, case, port, workdir):
    """Runs one server/client pair; returns (result dict, list of problems)."""
    problems = []
    tag = case.spec.replace(":", "-")
    env = dict(os.environ)
    env.update(SERVERIP="127.0.0.1", PORT=str(port), SIZE=args.size, SYNC="1" if case.mode == "sync" else "0",
               IODEPTH=str(case.iodepth), RW=case.rw, BS=case.bs, RAMP=f"{args.ramp}s",
               RUNTIME=f"{args.time}s", BUSY="1" if args.busy_poll else "0")
    memfile = None
    if case.mem == "dram":
        env.update(MEM="malloc", DWTP="0")
    else:
        fd, memfile = tempfile.mkstemp(prefix=f"rpma-fio-{tag}-", dir=args.mem_dir)
        os.ftruncate(fd, size_bytes(args.size))
        os.close(fd)
        # the region is registered FLUSH_TYPE_PERSISTENT; the APM client needs the server to
        # announce direct write to PMem (apm-server.fio)
        env.update(MEM=memfile, DWTP="1", PMEM_IS_PMEM_FORCE="1")

    jobs = args.jobs
    files = {r: os.path.join(workdir, f"{tag}.{r}") for r in
             ("server.json", "server.err", "client.json", "client.err")}
    fio = [args.fio, "--output-format=json"]
    server = None
    try:
        with open(files["server.err"], "w") as serr:
            server = subprocess.Popen(fio + [f"--output={files['server.json']}",
                                             os.path.join(jobs, f"{case.engine}-server.fio")],
                                      env=env, stdout=serr, stderr=subprocess.STDOUT,
                                      cwd=workdir)
        deadline = time.monotonic() + args.start_timeout
        while not listening(port):
            if server.poll() is not None:
                problems.append(f"server exited with {server.returncode} before listening")
                break
            if time.monotonic() > deadline:
                problems.append(f"server not listening on port {port} after {args.start_timeout} s")
                break
            time.sleep(0.05)
        if not problems:
            client_timeout = args.ramp + args.time + args.start_timeout + 30
            with open(files["client.err"], "w") as cerr:
                try:
                    rc = subprocess.run(fio + [f"--output={files['client.json']}",
                                               os.path.join(jobs, f"{case.engine}-client.fio")],
                                        env=env, stdout=cerr, stderr=subprocess.STDOUT,
                                        cwd=workdir, timeout=client_timeout).returncode
                    if rc != 0:
                        problems.append(f"client exited with {rc}")
                except subprocess.TimeoutExpired:
                    problems.append(f"client hung (killed after {client_timeout} s)")
            try:
                rc = server.wait(timeout=args.start_timeout + 10)
                if rc != 0:
                    problems.append(f"server exited with {rc}")
            except subprocess.TimeoutExpired:
                problems.append("server did not exit after the client ended (killed)")
    finally:
        if server is not None and server.poll() is None:
            server.kill()
            server.wait()
        if memfile:
            os.unlink(memfile)

    result = {"case": case.spec, "engine": case.engine, "mode": case.mode, "rw": case.rw,
              "bs": case.bs, "mem": case.mem, "iodepth": case.iodepth, "port": port}
    for role in ("server", "client"):
        lines, data = split_output(files[f"{role}.json"])
        try:
            with open(files[f"{role}.err"], errors="replace") as f:
                lines += f.read().splitlines()
        except OSError:
            pass
        for line in lines:
            if not line.strip() or BENIGN.match(line):
                continue
            if BAD.search(line):
                problems.append(f"{role}: {line.strip()}")
            else:
                print(f"  {case.spec} {role} says: {line.strip()}", file=sys.stderr)
        if data is None:
            if not any(p.startswith(role) for p in problems):
                problems.append(f"{role}: no JSON output")
            continue
        for job in data.get("jobs", []):
            if job.get("error"):
                problems.append(f"{role}: job {job.get('jobname')} error {job['error']}")
        if role == "client" and data.get("jobs"):
            job = data["jobs"][0]
            dirs = [d for d in ("read", "write") if job[d]["io_bytes"] > 0]
            if not dirs:
                problems.append("client: no I/O done")
            bw = sum(job[d]["bw_bytes"] for d in dirs)
            iops = sum(job[d]["iops"] for d in dirs)
            d = job[dirs[0]] if dirs else job["write"]
            lat = d["lat_ns"]
            pct = lat.get("percentile", {})
            result.update(bw_bytes=bw, iops=iops, lat_mean_ns=lat["mean"],
                          lat_p50_ns=pct.get("50.000000"), lat_p99_ns=pct.get("99.000000"),
                          lat_max_ns=lat["max"], ios=sum(job[x]["total_ios"] for x in dirs))
    result["problems"] = problems
    return result, problems


def run_perf(args, case, port):
    """The nearest rpma-perf loopback run for an APM case on DRAM (rpma-perf has no GPSPM and
    its loopback server has no file): write-flush (a write, then a flush, each completion
    waited for; busy-poll, as fio's client) or read, same size and iodepth."""
    op = "read" if case.rw in ("read", "randread") else "write-flush"
    cmd = [args.rpma_perf, "loopback", "--op", op, "--size", str(size_bytes(case.bs)),
           "--iodepth", str(case.iodepth), "--busy-poll", "--time", str(args.time),
           "--port", str(port), "--json"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.time + 60)
        data = json.loads(out.stdout)
    except (subprocess.TimeoutExpired, ValueError) as e:
        print(f"fio/run: rpma-perf failed for {case.spec}: {e}", file=sys.stderr)
        return None
    return {"command": " ".join(cmd), "bw_bytes": data["bw_bytes_per_s"], "iops": data["iops"],
            "lat_mean_us": data["lat_us"]["mean"], "lat_p50_us": data["lat_us"]["p50"],
            "lat_p99_us": data["lat_us"]["p99"]}


def table(results):
    head = ["engine", "mem", "mode", "rw", "bs", "iodepth", "MiB/s", "IOPS", "lat mean us",
            "p50 us", "p99 us"]
    rows = []
    for r in results:
        if "bw_bytes" not in r or r["problems"]:
            rows.append([r["engine"], r["mem"], r["mode"], r["rw"], r["bs"], str(r["iodepth"]),
                         "FAILED", "", "", "", ""])
            continue
        us = lambda ns: "-" if ns is None else f"{ns / 1000:.1f}"
        rows.append([r["engine"], r["mem"], r["mode"], r["rw"], r["bs"], str(r["iodepth"]),
                     f"{r['bw_bytes'] / 2**20:.1f}", f"{r['iops']:.0f}", us(r["lat_mean_ns"]),
                     us(r["lat_p50_ns"]), us(r["lat_p99_ns"])])
    perf = any("rpma_perf" in r for r in results)
    if perf:
        head += ["rpma-perf MiB/s", "rpma-perf p50 us"]
        for r, row in zip(results, rows):
            q = r.get("rpma_perf")
            row += [f"{q['bw_bytes'] / 2**20:.1f}", f"{q['lat_p50_us']:.1f}"] if q else ["", ""]
    out = ["| " + " | ".join(head) + " |",
           "|" + "|".join("---" if i < 6 else "---:" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fio", required=True, help="fio built by bench/fio/build.sh")
    p.add_argument("--jobs", default=os.path.join(HERE, "jobs"), help="the job files' folder")
    p.add_argument("--cases", default=",".join(DEFAULT_CASES), help="comma-separated cases")
    p.add_argument("--time", type=int, default=5, help="seconds measured per case")
    p.add_argument("--ramp", type=int, default=1, help="seconds of warm-up per case")
    p.add_argument("--iodepth", type=int, default=16, help="iodepth of the async cases")
    p.add_argument("--size", default="64MiB", help="server workspace size")
    p.add_argument("--busy-poll", action="store_true", help="GPSPM server: busy_wait_polling=1")
    p.add_argument("--port-base", type=int, default=25900, help="first port; one per case")
    p.add_argument("--mem-dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                   help="where the file-backed workspaces go")
    p.add_argument("--start-timeout", type=int, default=60, help="seconds for a server to listen")
    p.add_argument("--rpma-perf", help="also run rpma-perf loopback (this path) for each APM "
                   "case on DRAM, right after it, ports from --port-base + 25")
    p.add_argument("--out", help="write every result (JSON) here")
    p.add_argument("--keep", help="keep fio's outputs in this folder")
    args = p.parse_args()

    args.fio = os.path.abspath(args.fio)  # fio runs in a working folder of its own
    args.jobs = os.path.abspath(args.jobs)
    cases = [Case(s, args.iodepth) for s in args.cases.split(",") if s]
    results, failed = [], 0
    workdir = args.keep or tempfile.mkdtemp(prefix="rpma-fio-", dir=args.mem_dir)
    os.makedirs(workdir, exist_ok=True)
    for i, case in enumerate(cases):
        print(f"fio/run: {case.spec} (port {args.port_base + i}, {args.ramp}+{args.time} s)",
              file=sys.stderr, flush=True)
        result, problems = run_case(args, case, args.port_base + i, workdir)
        if args.rpma_perf and case.engine == "apm" and case.mem == "dram" and not problems:
            result["rpma_perf"] = run_perf(args, case, args.port_base + 25 + i)
        results.append(result)
        if problems:
            failed += 1
            for pr in problems:
                print(f"FAIL {case.spec}: {pr}", file=sys.stderr)
            tag = case.spec.replace(":", "-")
            for role in ("server", "client"):
                for ext in ("err", "json"):
                    path = os.path.join(workdir, f"{tag}.{role}.{ext}")
                    if os.path.exists(path):
                        with open(path, errors="replace") as f:
                            text = f.read()
                        if ext == "json":
                            text = text[:text.find("{\n")] if "{\n" in text else text[-3000:]
                        if text.strip():
                            print(f"--- {path}\n{text.rstrip()[-3000:]}", file=sys.stderr)
    if not args.keep:
        # fio's outputs, and the SIZE-byte file named "malloc" that fio lays out in its working
        # folder (the server engine then takes that name for DRAM and does not use the file)
        for name in os.listdir(workdir):
            os.unlink(os.path.join(workdir, name))
        os.rmdir(workdir)
    print(table(results))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"fio": args.fio, "time_s": args.time, "ramp_s": args.ramp,
                       "results": results}, f, indent=1)
    if failed:
        print(f"fio/run: {failed} of {len(cases)} cases FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
