#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""run.py -- rpma-perf side by side with raw TCP, libfabric (tcp provider) and UCX (UCX_TLS=tcp),
all over loopback. Each case runs every peer back to back; the whole set is repeated RUNS times
and the medians are reported. Called by bench/run.sh, which builds the programs first.
--plot FILE.svg draws the rpma/peer ratios (matplotlib); with --from RESULTS.json it only draws
the picture of an earlier run:
    python3 bench/run.py --plot docs/performance.svg --from bench/results.json
--bin-dir DIR (or RPMA_BENCH_BIN) finds rpma-perf, tcp_peer, fabric_peer, ucx_perftest, shm_peer
and idle_conns in DIR when --perf, --tcp, --fabric, --ucx, --shm or --idle are not given (a
bench/bundle.sh bundle passes its bin/).

Beside the bandwidth and write+flush cases: gpspm_* (rpma-perf --op gpspm: a write, then a flush
request by send that the server's application thread answers; the server waits in rpma_cq_wait or
busy-polls rpma_cq_get_wc as the client does) and sendrecv_* (rpma-perf --op send-recv, the same
exchange without the write, next to the raw TCP ping-pong). Bandwidth cases also get CPU seconds
(client + server) per GiB moved.

Same host (issue 11): rpma-shm is the rpma peer's command with --provider shm (the rpma peer
passes --provider tcp, so its column stays tcp when librpma picks shm on one host by itself);
shm-spin and shm-eventfd (bench/shm_peer pingpong) are the limits of the 8-byte round trips
(busy-poll and blocking), memcpy and pvm-writev (shm_peer stream) those of the bandwidth cases.
idle_1000 (only with --cases) opens 1000 idle connections with bench/idle_conns, once per
provider. --peers runs a subset of the peers (the alias shm names rpma, rpma-shm and the limits).

tcp-2msg (write+flush cases only) is the raw TCP ping-pong with the request sent as two writes
(tcp_peer lat --messages 2), as rpma sends the write and the flush as two frames when the program
posts them: the floor for that exchange, shown beside the targets, which are against one write.
tcp-2msg-spin is the same with a server that never sleeps (tcp_peer lat --server spin), as rpma's
target engine polls while requests come (RPMA_SPIN_US): what a target that keeps a core can reach.

RDMA (issue 20): rpma-verbs (rpma-perf server and client with --provider verbs on the address of
an RDMA device: --verbs-addr, $RPMA_VERBS_ADDR, $RPMA_GUEST_ADDR or the first RDMA link's),
upstream-verbs (the same rpma-perf over Debian's librpma0, by LD_LIBRARY_PATH: what the tool
costs on the library it was written for), base-verbs (the same over --baseline-lib's
librpma: an A/B of two builds; not in the alias) and perftest (ib_write_bw, ib_read_bw,
ib_read_lat, ib_write_lat, ib_send_lat, all -R, server and client on that address), alias verbs;
where there is no RDMA device they are reported unavailable, once. Case mapping in VERBS_CASES'
comment and docs/performance.md; the run in the soft-RoCE guest:
    bash tests/guest/guest.sh run --timeout 580 -- "python3 bench/run.py --peers verbs \\
        --perf build/tools/rpma-perf/rpma-perf --out bench/results-verbs.json ..." (the
doc gives the exact one)."""
import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
SIZES = [("4k", 4 * KiB), ("64k", 64 * KiB), ("1m", 1 * MiB)]
DEPTH = 32

# (case, kind, size, spin); kind: write | read (bandwidth) or one of LAT_KINDS (8-byte round
# trips: lat = write + flush (APM), gpspm = write + flush request answered by the server's
# thread, sendrecv = send answered by the server's thread)
LAT_KINDS = ("lat", "gpspm", "sendrecv", "readlat", "writelat")
CASES = [(f"write_{n}", "write", s, False) for n, s in SIZES] + \
        [(f"read_{n}", "read", s, False) for n, s in SIZES] + \
        [("lat_blocking", "lat", 8, False), ("lat_busy_poll", "lat", 8, True),
         ("gpspm_blocking", "gpspm", 8, False), ("gpspm_busy_poll", "gpspm", 8, True),
         ("sendrecv_blocking", "sendrecv", 8, False), ("sendrecv_busy_poll", "sendrecv", 8, True)]

# (case, peer, relation, value): rpma/peer must satisfy it (>= for bandwidth, <= for latency)
TARGETS = [("write_4k", "libfabric", ">=", 2.0), ("write_4k", "tcp", ">=", 1.5),
           ("read_4k", "libfabric", ">=", 1.3)] + \
    [(f"{op}_{size}", peer, ">=", 1.0) for op in ("write", "read") for size in ("64k", "1m")
     for peer in ("tcp", "libfabric")] + \
    [("lat_blocking", "tcp", "<=", 1.05), ("lat_busy_poll", "tcp", "<=", 1.1)] + \
    [(c, "tcp-2msg", "<=", 1.05) for c in ("lat_blocking", "lat_busy_poll")]  # issue 21

# (case, reference case, relation, value): rpma's median in case / rpma's median in the
# reference case, both from the same run (issue 10: GPSPM p50 <= 1.1x the APM round trip)
# and a busy-polling thread never slower than a waiting one
RELATIVE_TARGETS = [("gpspm_blocking", "lat_blocking", "<=", 1.1),
                    ("gpspm_busy_poll", "lat_busy_poll", "<=", 1.1),
                    ("lat_busy_poll", "lat_blocking", "<=", 1.0),
                    ("gpspm_busy_poll", "gpspm_blocking", "<=", 1.0)]
# shown beside them without a target
RELATIVE_INFO = [("sendrecv_blocking", "lat_blocking"), ("sendrecv_busy_poll", "lat_busy_poll")]

# (case, peer, relation, value): rpma's p99 / the peer's p99, same run
P99_TARGETS = [("lat_blocking", "tcp", "<=", 1.2), ("lat_busy_poll", "tcp", "<=", 1.2)] + \
    [(c, "tcp-2msg", "<=", 1.2) for c in ("lat_blocking", "lat_busy_poll")]  # issue 21

# (case, peer, relation, value): rpma's CPU seconds per GiB / the peer's
CPU_TARGETS = [("write_64k", "tcp", "<=", 1.2)]

# issue 20: rpma over verbs against perftest (ib_*_lat, ib_*_bw with -R) on the same RDMA device.
# Beside the cases above that map (write_*, read_*: ib_write_bw, ib_read_bw at the same size and
# depth; sendrecv_*: ib_send_lat, -e for blocking) two cases of their own, one operation at a time:
# read_lat (rpma read 8 B, post to completion, against ib_read_lat) and write_lat (rpma write 8 B,
# post to completion, the RC ack included, against ib_write_lat's ping-pong round trip, that is
# twice what it prints). They run by default whenever a verbs peer runs, and only for those peers.
VERBS_CASES = [("read_lat_busy_poll", "readlat", 8, True),
               ("write_lat_busy_poll", "writelat", 8, True)]
# upstream-verbs: the same rpma-perf over Debian's librpma (upstream, by LD_LIBRARY_PATH), so
# that what the tool itself costs shows beside what the library does
# base-verbs: the same over --baseline-lib's librpma (another build), for an A/B of two builds
VERBS_PEERS = ["rpma-verbs", "upstream-verbs", "base-verbs", "perftest"]
# (case, relation, value): rpma-verbs / perftest, medians of the same run
VERBS_TARGETS = [(f"{op}_{n}", ">=", 0.9) for op in ("write", "read") for n, _ in SIZES] + \
    [(c, "<=", 1.1) for c in ("read_lat_busy_poll", "write_lat_busy_poll", "sendrecv_blocking",
                              "sendrecv_busy_poll")]
PERFTEST_TOOLS = {"write": "ib_write_bw", "read": "ib_read_bw", "readlat": "ib_read_lat",
                  "writelat": "ib_write_lat", "sendrecv": "ib_send_lat"}

# cases run only when --cases names them: 1000 idle connections per provider (issue 11);
# the metric is Pss per connection (KiB), with the idle CPU beside it
IDLE_CASES = [("idle_1000", "idle", 1000, False)]

# issue 11, (case, peer, reference, relation, value): the peer's median / the reference's, both
# from the same run; reference None: the peer's median itself (us)
SHM_TARGETS = [("lat_busy_poll", "rpma-shm", None, "<=", 3.0),
               ("lat_blocking", "rpma-shm", "shm-eventfd", "<=", 1.2),
               ("lat_blocking", "rpma-shm", "rpma", "<=", 0.5),
               ("write_1m", "rpma-shm", "pvm-writev", ">=", 0.8),
               ("write_1m", "rpma-shm", "rpma", ">=", 2.0),
               ("read_1m", "rpma-shm", "pvm-writev", ">=", 0.8),
               ("read_1m", "rpma-shm", "rpma", ">=", 2.0),
               ("write_4k", "rpma-shm", "rpma", ">=", 3.0)]

TOOLS = {"perf": "rpma-perf", "tcp": "tcp_peer", "fabric": "fabric_peer", "ucx": "ucx_perftest",
         "shm": "shm_peer", "idle": "idle_conns"}

# a peer's method is its name with - as _
PEERS = ["rpma", "tcp", "tcp-2msg", "tcp-2msg-spin", "libfabric", "ucx", "rpma_base",
         "rpma-shm", "shm-spin", "shm-eventfd", "memcpy", "pvm-writev"] + VERBS_PEERS
TCP_PEERS = ["tcp", "libfabric", "ucx", "rpma_base"]  # the main table and the plot
SHM_PEERS = ["rpma-shm", "shm-spin", "shm-eventfd", "memcpy", "pvm-writev"]
PEER_ALIASES = {"shm": ["rpma"] + SHM_PEERS,
                "verbs": [p for p in VERBS_PEERS if p != "base-verbs"]}
IDLE_PEERS = ("rpma", "rpma-shm")  # the only peers of IDLE_CASES


class Unavailable(Exception):
    """the host refuses what a limit peer measures (process_vm_writev: EPERM): not a failure"""


class Runner:
    def __init__(self, args):
        self.a = args
        self.port = 51000
        self.ucx_port = 52000
        self.perf_has_provider = self.perf_has_provider_verbs = self.perf_has_clock = False
        self.verbs_why = None  # None: not asked yet; "": the verbs peers can run
        self.verbs_rate = {}
        if args.perf:
            h = subprocess.run([args.perf, "--help"], capture_output=True, text=True)
            self.perf_has_provider = "--provider" in h.stdout
            self.perf_has_provider_verbs = "verbs" in h.stdout.split("--provider", 1)[-1][:40]
            self.perf_has_clock = "--clock" in h.stdout

    def next_port(self):
        self.port = 51000 + (self.port - 51000 + 1) % 900
        return self.port

    def run_json(self, cmd, env=None, timeout=None):
        t = timeout or (self.a.time * 4 + 60)
        c0 = children_cpu()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=t, env=env)
        # every process of the command (the forked servers are waited for by their parents)
        self.proc_cpu_s = children_cpu() - c0
        if p.returncode != 0:
            raise RuntimeError(f"exit {p.returncode}: {p.stderr.strip()[-300:]}")
        return json.loads(p.stdout.strip().splitlines()[-1])

    def cpu_extra(self, j, nbytes):
        """client + server CPU of the measured run as the tool reports it (None if it reports
        no server figure), the whole command's CPU (set-up included) and the bytes measured"""
        cpu = None
        if j.get("client_cpu_s") is not None and j.get("server_cpu_s") is not None:
            cpu = j["client_cpu_s"] + j["server_cpu_s"]
        return {"cpu_s": cpu, "proc_cpu_s": round(self.proc_cpu_s, 4), "bytes": nbytes}

    # each returns (metric value, extra dict, command string)
    def rpma(self, kind, size, spin, env=None, provider="tcp"):
        if kind == "idle":
            return self.idle(size, provider) if env is None else None
        cmd = [self.a.perf, "loopback", "--port", str(self.next_port()), "--time",
               str(self.a.time), "--json"]
        if self.perf_has_provider:
            cmd += ["--provider", provider]
        else:  # an rpma-perf from before --provider (a bundle): the variable it would set
            env = dict(env or os.environ, RPMA_PROVIDER=provider)
        if kind in LAT_KINDS:
            op = {"lat": "write-flush", "gpspm": "gpspm", "sendrecv": "send-recv",
                  "readlat": "read", "writelat": "write"}[kind]
            cmd += ["--op", op, "--size", str(size), "--iodepth", "1"]
        else:
            cmd += ["--op", kind, "--size", str(size), "--iodepth", str(DEPTH)]
        if spin:  # gpspm, send-recv: the server's thread spins too (--server-mode follows)
            cmd.append("--busy-poll")
        j = self.run_json(cmd, env=env)
        if not j.get("verified"):
            raise RuntimeError("rpma-perf data check failed")
        if j.get("provider", provider) != provider:
            raise RuntimeError(f"rpma-perf ran provider {j['provider']}, not {provider}")
        v = j["lat_us"]["p50"] if kind in LAT_KINDS else j["bw_bytes_per_s"] / MiB
        return v, {"client_cpu_s": j["client_cpu_s"], "server_cpu_s": j["server_cpu_s"],
                   "p99_us": j["lat_us"]["p99"], "mean_us": j["lat_us"]["mean"],
                   **self.cpu_extra(j, j["bytes"])}, \
            (cmd if self.perf_has_provider else [f"RPMA_PROVIDER={provider}"] + cmd)

    def rpma_shm(self, kind, size, spin):
        return self.rpma(kind, size, spin, provider="shm")

    # ---- issue 20: the verbs peers, on the RDMA device's address ----
    def verbs_ready(self):
        """the address of an RDMA device, or Unavailable saying why there is none"""
        if self.verbs_why is None:
            self.verbs_why = verbs_unavailable(self.a)
        if self.verbs_why:
            raise Unavailable(self.verbs_why)
        return self.a.verbs_addr

    # rpma-perf server and client over RPMA_PROVIDER=verbs on that address; every case spins
    # (--busy-poll) but sendrecv_blocking, as perftest polls unless -e; timed by the TSC
    # (--clock tsc), as perftest times: a guest's CLOCK_MONOTONIC is an emulated HPET read,
    # several microseconds per operation
    def rpma_verbs(self, kind, size, spin, libdir=None):
        if kind in ("idle", "gpspm", "lat"):
            return None  # no perftest counterpart (lat: write+flush, see docs/performance.md)
        addr = self.verbs_ready()
        busy = spin or kind in ("write", "read")
        env = dict(os.environ, RPMA_PROVIDER="verbs")
        if libdir:
            env["LD_LIBRARY_PATH"] = libdir
        prov = ["--provider", "verbs"] if self.perf_has_provider_verbs else []
        port = str(self.next_port())
        region = 64 * MiB
        while region < DEPTH * size + 4096:
            region *= 2
        errf = open(os.devnull, "w")
        srv = subprocess.Popen([self.a.perf, "server", "--addr", addr, "--port", port, "--size",
                                str(region)] + prov, env=env, stdout=subprocess.PIPE,
                               stderr=errf, text=True)
        try:
            line = srv.stdout.readline()  # its first line says it listens (or it exited)
            if "listening" not in line:
                srv.wait(timeout=30)
                raise RuntimeError(f"rpma-perf server did not start (exit {srv.returncode})")
            cmd = [self.a.perf, "client", "--addr", addr, "--port", port, "--json", "--time",
                   str(self.a.time)] + prov
            if self.perf_has_clock:
                cmd += ["--clock", "tsc"]
            if kind in LAT_KINDS:
                op = {"sendrecv": "send-recv", "readlat": "read", "writelat": "write"}[kind]
                cmd += ["--op", op, "--size", str(size), "--iodepth", "1"]
            else:
                cmd += ["--op", kind, "--size", str(size), "--iodepth", str(DEPTH)]
            if busy:
                cmd.append("--busy-poll")
            j = self.run_json(cmd, env=env)
        finally:
            srv.send_signal(2)  # SIGINT: the server's way out
            try:
                srv.wait(timeout=20)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait()
            errf.close()
        if not j.get("verified"):
            raise RuntimeError("rpma-perf data check failed")
        if j.get("provider") != "verbs":
            raise RuntimeError(f"rpma-perf ran provider {j.get('provider')}, not verbs")
        if not libdir:
            # perftest's iterations for the same case in this run: about --time seconds at
            # rpma's rate
            self.verbs_rate[(kind, size, spin)] = j["ops"] / max(j["seconds"], 1e-6)
        v = j["lat_us"]["p50"] if kind in LAT_KINDS else j["bw_bytes_per_s"] / MiB
        return v, {"client_cpu_s": j["client_cpu_s"], "server_cpu_s": j["server_cpu_s"],
                   "p99_us": j["lat_us"]["p99"], "mean_us": j["lat_us"]["mean"],
                   "ops": j["ops"], "busy_poll": busy, **self.cpu_extra(j, j["bytes"])}, \
            ([f"LD_LIBRARY_PATH={libdir}"] if libdir else []) + \
            ([] if prov else ["RPMA_PROVIDER=verbs"]) + cmd

    # the same over upstream librpma (Debian's librpma0), the library the tool was written for
    def upstream_verbs(self, kind, size, spin):
        d = reference_lib_dir()
        if not d:
            raise Unavailable("Debian's librpma.so.0 (librpma0) is not installed")
        return self.rpma_verbs(kind, size, spin, libdir=d)

    def base_verbs(self, kind, size, spin):
        if not self.a.baseline_lib:
            raise Unavailable("no --baseline-lib")
        return self.rpma_verbs(kind, size, spin, libdir=self.a.baseline_lib)

    # perftest, server and client on the same address, connected by rdma_cm (-R)
    def perftest(self, kind, size, spin):
        tool = PERFTEST_TOOLS.get(kind)
        if tool is None or (kind in ("readlat", "writelat") and not spin):
            return None
        addr = self.verbs_ready()
        path = shutil.which(tool)
        if not path:
            raise Unavailable(f"{tool} not found (Debian: perftest)")
        args = ["-R", "-F", "-s", str(size)]
        # iterations: about --time seconds at the rate rpma-perf had in this case and run (-D,
        # perftest's timed mode, printed 0 MB/s now and then in the emulated guest)
        rate = self.verbs_rate.get((kind, size, spin), 1000 / self.a.time)
        if kind in LAT_KINDS:
            args += ["-n", str(min(100000, max(200, int(rate * self.a.time))))]
            if not spin:
                args.append("-e")  # sleep on CQ events, as rpma_cq_wait
        else:
            # -Q 1: every operation signaled, as rpma-perf's (perftest's default moderates)
            args += ["-t", str(DEPTH), "-Q", "1", "-n",
                     str(min(1000000, max(4 * DEPTH, int(rate * self.a.time))))]
        last = None
        for attempt in range(3):  # the client may come before the server listens
            port = str(self.next_port() + 4000)
            srv = subprocess.Popen([path, "-p", port] + args, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            try:
                time.sleep(1.0 + attempt)
                cmd = [path, "-p", port] + args + [addr]
                p = subprocess.run(cmd, capture_output=True, text=True,
                                   timeout=self.a.time * 10 + 120)
            finally:
                try:
                    srv.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    srv.kill()
                    srv.wait()
            res = parse_perftest(p.stdout, kind)
            # a run with no figures (0 MB/s, inf us: perftest's clock saw nothing) is retried
            fig = ("t_typical", "t_avg", "p99") if kind in LAT_KINDS else ("bw_avg",)
            if p.returncode == 0 and res and all(0 < res[k] < float("inf") for k in fig):
                break
            last = f"{tool} exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}"
        else:
            raise RuntimeError(last)
        if kind in LAT_KINDS:
            # write_lat and send_lat print half their ping-pong's round trip; read_lat the read
            k = 1 if kind == "readlat" else 2
            v = k * res["t_typical"]
            return v, {"p99_us": k * res["p99"], "mean_us": k * res["t_avg"],
                       "printed": res, "rtt_factor": k, "ops": res["iterations"],
                       "busy_poll": spin}, cmd
        # perftest's MB is 2^20 bytes (its format_factor 0x100000): MiB/s as rpma-perf's
        return res["bw_avg"], {"printed": res, "busy_poll": True}, cmd

    # N idle connections (bench/idle_conns): Pss per connection in KiB, idle CPU beside it
    def idle(self, n, provider):
        if not self.a.idle:
            return None
        cmd = [self.a.idle, "--connections", str(n), "--idle", str(self.a.time), "--provider",
               provider, "--port", str(self.next_port() + 3000)]
        j = self.run_json(cmd, timeout=self.a.time * 4 + 180)
        return j["pss_kib_per_conn"], {
            "idle_cpu_s": j["idle_cpu_s"], "idle_cpu_pct": j["idle_cpu_pct_of_one_core"],
            "wakeups_per_s": j["client"]["idle_wakeups_per_s"] +
            j["server"]["idle_wakeups_per_s"], "connect_s": j["connect_s"],
            "threads": j["client"]["threads"] + j["server"]["threads"],
            "fds": j["client"]["fds"] + j["server"]["fds"],
            "slab_kib_per_conn_systemwide": j["slab_kib_per_conn_systemwide"]}, cmd

    # the same-host limits (bench/shm_peer): the ping-pong beside the 8-byte round trips ...
    def shm_pingpong(self, mode, kind, size):
        if not self.a.shm or kind not in ("lat", "sendrecv"):
            return None
        cmd = [self.a.shm, "pingpong", "--mode", mode, "--size", str(size), "--seconds",
               str(self.a.time)]
        j = self.run_json(cmd)
        return j["lat_us"]["p50"], {"client_cpu_s": j["client_cpu_s"],
                                    "server_cpu_s": j["server_cpu_s"],
                                    "p99_us": j["lat_us"]["p99"], "mean_us": j["lat_us"]["mean"],
                                    **self.cpu_extra(j, j["ops"] * j["size"])}, cmd

    def shm_spin(self, kind, size, spin):
        return self.shm_pingpong("spin", kind, size) if spin else None

    def shm_eventfd(self, kind, size, spin):
        return None if spin else self.shm_pingpong("eventfd", kind, size)

    # ... and streaming copies beside writes and reads (one stream is the reference for both)
    def shm_stream(self, mode, kind, size):
        if not self.a.shm or kind not in ("write", "read"):
            return None
        cmd = [self.a.shm, "stream", "--mode", mode, "--size", str(size), "--seconds",
               str(self.a.time)]
        j = self.run_json(cmd)
        if not j.get("available", True):
            raise Unavailable(f"{mode}: {j.get('error')}")
        return j["bw_bytes_per_s"] / MiB, {"client_cpu_s": j["client_cpu_s"],
                                          "server_cpu_s": j["server_cpu_s"],
                                          **self.cpu_extra(j, j["ops"] * j["size"])}, cmd

    def memcpy(self, kind, size, spin):
        return self.shm_stream("memcpy", kind, size)

    def pvm_writev(self, kind, size, spin):
        return self.shm_stream("pvm_writev", kind, size)

    # the same rpma-perf over another build of librpma.so.0 (--baseline-lib): a regression check
    def rpma_base(self, kind, size, spin):
        if not self.a.baseline_lib:
            return None
        # a bundle's wrappers (bench/bundle.sh) give the loader its own path: the variable
        # that puts the baseline first there
        env = dict(os.environ, LD_LIBRARY_PATH=self.a.baseline_lib,
                   RPMA_BUNDLE_LIB_FIRST=self.a.baseline_lib)
        v, extra, cmd = self.rpma(kind, size, spin, env)
        return v, extra, [f"LD_LIBRARY_PATH={self.a.baseline_lib}",
                          f"RPMA_BUNDLE_LIB_FIRST={self.a.baseline_lib}"] + cmd

    def tcp(self, kind, size, spin, messages=1, server=None):
        if kind == "gpspm":
            return None  # no write to place before the message
        if kind in LAT_KINDS:  # the ping-pong: beside write+flush and send/recv
            cmd = [self.a.tcp, "lat", "--size", str(size)] + (["--spin"] if spin else []) + \
                (["--messages", str(messages)] if messages != 1 else []) + \
                (["--server", server] if server else [])
        else:  # a TCP stream is the reference for both directions
            # over as much memory as rpma-perf's DEPTH buffers in flight, not one hot buffer
            cmd = [self.a.tcp, "bw", "--size", str(size), "--span", str(DEPTH * size)]
        cmd += ["--time", str(self.a.time), "--port", str(self.next_port() + 1000)]
        j = self.run_json(cmd)
        v = j["lat_us"]["p50"] if kind in LAT_KINDS else j["bw_bytes_per_s"] / MiB
        return v, {"client_cpu_s": j["client_cpu_s"], "server_cpu_s": j.get("server_cpu_s"),
                   "p99_us": j["lat_us"]["p99"], "mean_us": j["lat_us"]["mean"],
                   **self.cpu_extra(j, j["ops"] * j["size"])}, cmd

    def tcp_2msg(self, kind, size, spin):
        # only write+flush is two posts
        return self.tcp(kind, size, spin, messages=2) if kind == "lat" else None

    def tcp_2msg_spin(self, kind, size, spin):
        return self.tcp(kind, size, spin, messages=2, server="spin") if kind == "lat" else None

    def libfabric(self, kind, size, spin):
        if not self.a.fabric or kind in ("gpspm", "sendrecv"):
            return None
        if kind == "lat":
            cmd = [self.a.fabric, "lat", "--size", str(size)] + (["--spin"] if spin else [])
        else:
            cmd = [self.a.fabric, kind, "--size", str(size), "--iodepth", str(DEPTH)]
        cmd += ["--time", str(self.a.time), "--port", str(self.next_port() + 2000)]
        j = self.run_json(cmd)
        v = j["lat_us"]["p50"] if kind in LAT_KINDS else j["bw_bytes_per_s"] / MiB
        # server_cpu_s is the target's whole CPU time (wait4), its set-up included
        return v, {"client_cpu_s": j["client_cpu_s"], "server_cpu_s": j["server_cpu_s"],
                   "p99_us": j["lat_us"]["p99"], "mean_us": j["lat_us"]["mean"],
                   **self.cpu_extra(j, j["ops"] * j["size"])}, cmd

    def ucx(self, kind, size, spin):
        if not self.a.ucx or kind == "gpspm":
            return None
        if kind in LAT_KINDS and not spin:
            return None  # ucx_perftest always polls its worker: no blocking latency test
        test = {"write": "ucp_put_bw", "read": "ucp_get", "lat": "ucp_put_lat",
                "sendrecv": "tag_lat"}[kind]
        # iteration counts aimed at about --time seconds at the rates seen on loopback
        rate = {"write": 400e6 / size + 2000, "read": 25e6 / size + 100, "lat": 10000,
                "sendrecv": 10000}[kind]
        n = max(200, int(rate * self.a.time))
        warm = max(10, n // 10)
        self.ucx_port = 52000 + (self.ucx_port - 52000 + 1) % 400
        env = dict(os.environ, UCX_TLS="tcp", UCX_NET_DEVICES="lo")
        c0 = children_cpu()
        srv = subprocess.Popen([self.a.ucx, "-p", str(self.ucx_port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            cmd = [self.a.ucx, "127.0.0.1", "-p", str(self.ucx_port), "-t", test, "-s",
                   str(size), "-n", str(n), "-w", str(warm)]
            p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                               timeout=self.a.time * 10 + 60)
            final = [l for l in p.stdout.splitlines() if l.startswith("Final:")]
            if p.returncode != 0 or not final:
                raise RuntimeError(f"ucx_perftest exit {p.returncode}: "
                                   f"{(p.stderr or p.stdout).strip()[-300:]}")
            f = final[0].split()
            # Final: iters p50 avg overall bw_avg bw_overall rate_avg rate_overall (bw in MiB/s)
            if kind in LAT_KINDS:
                v = 2 * float(f[2])  # put_lat and tag_lat report half the round trip
                extra = {"one_way_p50_us": float(f[2])}
            else:
                v = float(f[6])
                extra = {"iterations": n}
        finally:
            try:
                srv.wait(timeout=10)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait()
        if kind not in LAT_KINDS:
            # ucx_perftest reports no CPU time: both processes' whole CPU (set-up and warm-up
            # included) over the bytes of every iteration, warm-up included
            extra.update({"cpu_s": None, "proc_cpu_s": round(children_cpu() - c0, 4),
                          "bytes": (n + warm) * size})
        return v, extra, ["UCX_TLS=tcp"] + cmd


def parse_perftest(out, kind):
    """the figures of perftest's result line: the line after the one that starts with #bytes"""
    lines = out.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.strip().startswith("#bytes"):
            try:
                f = [float(x) for x in lines[i + 1].split()]
            except ValueError:
                return None
            if kind in LAT_KINDS and len(f) >= 9:
                return dict(zip(("bytes", "iterations", "t_min", "t_max", "t_typical", "t_avg",
                                 "t_stdev", "p99", "p999"), f))
            if kind not in LAT_KINDS and len(f) >= 5:
                return dict(zip(("bytes", "iterations", "bw_peak", "bw_avg", "msg_rate_mpps"),
                                f))
    return None


def reference_lib_dir():
    """the directory of Debian's librpma.so.0 (upstream), or None"""
    for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"):
        if os.path.exists(os.path.join(d, "librpma.so.0")):
            return d
    return None


def verbs_unavailable(a):
    """None where an RDMA device serves a.verbs_addr (found when not given), else why not"""
    if not os.path.isdir("/dev/infiniband"):
        return "no RDMA device here (no /dev/infiniband)"
    if not a.verbs_addr:
        try:  # the IPv4 address of the first RDMA link's netdev
            links = json.loads(subprocess.run(["rdma", "-j", "link", "show"],
                                              capture_output=True, text=True).stdout or "[]")
            for link in links:
                dev = link.get("netdev")
                if not dev:
                    continue
                info = json.loads(subprocess.run(["ip", "-j", "-4", "addr", "show", "dev", dev],
                                                 capture_output=True, text=True).stdout or "[]")
                addrs = [x["local"] for i in info for x in i.get("addr_info", [])]
                if addrs:
                    a.verbs_addr = addrs[0]
                    break
        except (OSError, ValueError):
            pass
    if not a.verbs_addr:
        return "no IPv4 address on an RDMA link (rdma link; give --verbs-addr)"
    return None


def children_cpu():
    """user + system seconds of every child process waited for so far"""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def cpu_per_gib(extra):
    """CPU seconds (client + server) per GiB moved: the tools' in-run figures where they report
    both sides, else the whole commands' CPU (method 'process')"""
    if not extra.get("bytes"):
        return None, None
    if extra.get("cpu_s") is not None:
        return extra["cpu_s"] / (extra["bytes"] / GiB), "run"
    if extra.get("proc_cpu_s") is not None:
        return extra["proc_cpu_s"] / (extra["bytes"] / GiB), "process"
    return None, None


def cpu_method_of(out, case, peer):
    for c in out["cases"]:
        if c["case"] == case:
            return (c.get("cpu_method") or {}).get(peer)
    return None


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "loadavg_start": os.getloadavg()[0]}


def fmt(v, kind):
    if v is None:
        return "-"
    if kind == "idle":
        return f"{v:.1f} KiB"
    return f"{v:.1f} us" if kind in LAT_KINDS else f"{v:.0f} MiB/s"


PEER_LABELS = {"tcp": "raw TCP", "libfabric": "libfabric (tcp provider)",
               "ucx": "UCX (UCX_TLS=tcp)", "rpma_base": "rpma, baseline build"}
PEER_COLOURS = {"tcp": "#4c72b0", "libfabric": "#dd8452", "ucx": "#55a868", "rpma_base": "#8172b3"}


def case_label(c):
    if c["kind"] in LAT_KINDS:
        name = {"lat": "write+flush", "gpspm": "GPSPM", "sendrecv": "send/recv"}[c["kind"]]
        return f"{name} 8 B\n" + ("busy-poll" if c["busy_poll"] else "blocking")
    size = c["size"]
    unit = f"{size // MiB} MiB" if size >= MiB else f"{size // KiB} KiB"
    return f"{c['kind']} {unit}"


def plot(results, path):
    """Draws results' rpma/peer ratios into path (SVG, PNG, ... by its suffix): a group of bars
    per case, a colour per peer, each bar going from 1.0 (as fast as the peer) to the ratio on a
    log scale, and a black mark at each target. Bandwidth (higher is better) and latency (lower is
    better) get a panel each."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        sys.exit(f"run.py: --plot needs matplotlib for {sys.executable} "
                 "(Debian: python3-matplotlib, see bench/install-deps.sh)")
    plt.rcParams["svg.hashsalt"] = "rpma-bench"  # the same results give the same file
    plt.rcParams["svg.fonttype"] = "none"        # text stays text
    # only cases with a peer to compare with (gpspm has none)
    cases = [c for c in results["cases"] if c["kind"] != "idle" and
             any(c["ratios_rpma_to"].get(p) is not None for p in TCP_PEERS)]
    peers = [p for p in TCP_PEERS
             if any(c["ratios_rpma_to"].get(p) is not None for c in cases)]
    panels = [(k, [c for c in cases if (c["kind"] in LAT_KINDS) == (k == "lat")])
              for k in ("bw", "lat")]
    panels = [(k, cs) for k, cs in panels if cs]
    fig, axes = plt.subplots(1, len(panels), figsize=(12, 5.2), squeeze=False,
                             gridspec_kw={"width_ratios": [len(cs) for _, cs in panels]})
    width = 0.8 / max(1, len(peers))
    target_drawn = False
    for ax, (kind, cs) in zip(axes[0], panels):
        values = [r for c in cs for r in c["ratios_rpma_to"].values() if r]
        values += [t["value"] for c in cs for t in c.get("targets", [])]
        lo, hi = min(values + [0.5]) / 1.5, max(values + [2.0]) * 1.6
        for i, peer in enumerate(peers):
            xs = [j + (i - (len(peers) - 1) / 2) * width for j in range(len(cs))]
            for x, c in zip(xs, cs):
                r = c["ratios_rpma_to"].get(peer)
                if r is None:
                    ax.text(x, 1.03, "n/a", ha="center", va="bottom", fontsize=7, color="grey")
                    continue
                ax.bar(x, r - 1, width * 0.92, bottom=1,
                       color=PEER_COLOURS.get(peer, "grey"),
                       label=PEER_LABELS.get(peer, peer) if c is cs[0] else None)
                ax.text(x, r * (1.06 if r >= 1 else 0.94), f"{r:.2f}" if r < 10 else f"{r:.0f}",
                        ha="center", va="bottom" if r >= 1 else "top", fontsize=7)
                for t in c.get("targets", []):
                    if t["peer"] == peer:
                        ax.plot([x - width / 2, x + width / 2], [t["value"]] * 2, color="black",
                                linewidth=2.2, label=None if target_drawn else
                                "target for rpma/peer")
                        target_drawn = True
        ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        steps = (0.25, 0.5, 0.75, 1, 1.5, 2, 3) if hi / lo < 20 else \
            (0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500)
        ticks = [t for t in steps if lo <= t <= hi]
        ax.yaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xticks(range(len(cs)))
        ax.set_xticklabels([case_label(c) for c in cs])
        ax.grid(axis="y", which="both", alpha=0.25)
        if kind == "bw":
            ax.set_title("bandwidth, iodepth 32: rpma/peer, higher is better", fontsize=10)
            ax.set_ylabel("rpma / peer (log scale; 1.0 = as fast as the peer)")
        else:
            ax.set_title("latency, 8-byte round trip p50:\nrpma/peer, lower is better", fontsize=10)
            ax.set_ylabel("rpma / peer (log scale)")
    m = results.get("machine", {})
    fig.suptitle("rpma against other transports over TCP loopback: medians of "
                 f"{results.get('runs', '?')} runs of {results.get('seconds_per_run', '?'):g} s, "
                 f"{m.get('cpus', '?')} CPUs ({m.get('cpu_model', '?')})", fontsize=11)
    handles, labels = [], []
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    fig.savefig(path, metadata={"Date": None} if str(path).endswith(".svg") else None)
    plt.close(fig)
    print(f"plot: {path}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perf", help="rpma-perf (required unless --from or --bin-dir)")
    ap.add_argument("--tcp", help="bench/tcp_peer (required unless --from or --bin-dir)")
    ap.add_argument("--fabric", default=None)
    ap.add_argument("--ucx", default=None)
    ap.add_argument("--shm", default=None, help="bench/shm_peer (the same-host limits)")
    ap.add_argument("--idle", default=None, help="bench/idle_conns (case idle_1000)")
    ap.add_argument("--bin-dir", default=os.environ.get("RPMA_BENCH_BIN", ""),
                    help="where to find rpma-perf, tcp_peer, fabric_peer, ucx_perftest, "
                    "shm_peer and idle_conns not given by --perf, --tcp, --fabric, --ucx, --shm, "
                    "--idle (default: $RPMA_BENCH_BIN)")
    ap.add_argument("--verbs-addr", default=os.environ.get("RPMA_VERBS_ADDR") or
                    os.environ.get("RPMA_GUEST_ADDR", ""),
                    help="the verbs peers' address, an RDMA device's (default: $RPMA_VERBS_ADDR, "
                    "$RPMA_GUEST_ADDR, else the first RDMA link's IPv4 address)")
    ap.add_argument("--time", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="results.json")
    ap.add_argument("--cases", default="", help="comma-separated subset of the cases: " +
                    ", ".join(c[0] for c in CASES) + "; and, only when named: " +
                    ", ".join(c[0] for c in IDLE_CASES))
    ap.add_argument("--peers", default="", help="comma-separated subset of the peers: " +
                    ", ".join(PEERS) + " (shm: " + ",".join(PEER_ALIASES["shm"]) + "; verbs: " +
                    ",".join(PEER_ALIASES["verbs"]) + ")")
    ap.add_argument("--baseline-lib", default="",
                    help="a folder with another librpma.so.0: rpma-perf runs over it as well")
    ap.add_argument("--plot", default="", metavar="FILE.svg",
                    help="draw the rpma/peer ratios into FILE (needs matplotlib)")
    ap.add_argument("--from", dest="from_json", default="", metavar="RESULTS.json",
                    help="run nothing: only --plot the results of an earlier run")
    a = ap.parse_args()
    if a.from_json:
        if not a.plot:
            ap.error("--from needs --plot")
        with open(a.from_json) as f:
            plot(json.load(f), a.plot)
        return 0
    for attr, name in TOOLS.items():
        if getattr(a, attr) is None or (attr in ("perf", "tcp") and not getattr(a, attr)):
            path = os.path.join(a.bin_dir, name) if a.bin_dir else ""
            setattr(a, attr, path if path and os.access(path, os.X_OK) else "")
    peers = PEERS
    if a.peers:
        want = [x for p in a.peers.split(",") for x in PEER_ALIASES.get(p, [p])]
        unknown = set(want) - set(PEERS)
        if unknown:
            ap.error(f"unknown peer(s) {', '.join(sorted(unknown))}; the peers: " +
                     ", ".join(PEERS) + ", or the aliases shm, verbs")
        peers = [p for p in PEERS if p in want]
    if not a.perf or (any(p in peers for p in ("tcp", "tcp-2msg", "tcp-2msg-spin")) and not a.tcp):
        ap.error("--perf and --tcp are required (or --bin-dir with them, or --from with --plot)")
    if a.baseline_lib and not os.path.isfile(os.path.join(a.baseline_lib, "librpma.so.0")):
        # LD_LIBRARY_PATH to it would be ignored, and rpma-perf would run over its own build:
        # the base column would compare that build with itself
        ap.error(f"--baseline-lib {a.baseline_lib} holds no librpma.so.0 (a build folder's is "
                 "at its top, e.g. build/, not build/src/)")
    print(f"run.py: rpma-perf {a.perf}, tcp_peer {a.tcp or '(none)'}, "
          f"fabric_peer {a.fabric or '(none)'}, ucx_perftest {a.ucx or '(none)'}, "
          f"shm_peer {a.shm or '(none)'}, idle_conns {a.idle or '(none)'}", file=sys.stderr)
    r = Runner(a)
    verbs_why = None
    if set(peers) & set(VERBS_PEERS):  # asked once: without a device they say so, once
        verbs_why = verbs_unavailable(a)
        r.verbs_why = verbs_why or ""
        if verbs_why:
            print(f"run.py: the verbs peers ({', '.join(VERBS_PEERS)}) are unavailable: "
                  f"{verbs_why}", file=sys.stderr)
            peers = [p for p in peers if p not in VERBS_PEERS]
            if not peers:
                return 77
        else:
            print(f"run.py: the verbs peers run on {a.verbs_addr}", file=sys.stderr)
    all_cases = CASES + VERBS_CASES + IDLE_CASES
    unknown = set(a.cases.split(",")) - {c[0] for c in all_cases} if a.cases else set()
    if unknown:
        ap.error(f"unknown case(s) {', '.join(sorted(unknown))}; the cases: " +
                 ", ".join(c[0] for c in all_cases))
    verbs_on = bool(set(peers) & set(VERBS_PEERS))
    cases = [c for c in CASES if not a.cases or c[0] in a.cases.split(",")] + \
        [c for c in VERBS_CASES if (a.cases and c[0] in a.cases.split(",")) or
         (not a.cases and verbs_on)] + \
        [c for c in IDLE_CASES if a.cases and c[0] in a.cases.split(",")]
    verbs_case_names = {c[0] for c in VERBS_CASES}
    info = machine()
    samples = {(c[0], p): [] for c in cases for p in PEERS}
    extras = {(c[0], p): [] for c in cases for p in PEERS}
    cmds, errors = {}, {}
    t_start = time.time()
    for run in range(a.runs):
        for case, kind, size, spin in cases:
            for peer in peers:
                if kind == "idle" and peer not in IDLE_PEERS:
                    continue
                if case in verbs_case_names and peer not in VERBS_PEERS:
                    continue
                run_peer = getattr(r, peer.replace("-", "_"))
                try:
                    try:
                        res = run_peer(kind, size, spin)
                    except RuntimeError:  # e.g. a port taken by someone else: once more
                        res = run_peer(kind, size, spin)
                except Exception as e:  # one failed peer must not end the comparison
                    un = isinstance(e, Unavailable)
                    errors.setdefault((case, peer), []).append(
                        ("unavailable: " if un else "") + str(e))
                    print(f"  run {run + 1} {case:14s} {peer:11s} "
                          f"{'UNAVAILABLE' if un else 'FAILED'}: {e}", file=sys.stderr)
                    continue
                if res is None:
                    continue
                v, extra, cmd = res
                samples[(case, peer)].append(v)
                extras[(case, peer)].append(extra)
                cmds[(case, peer)] = " ".join(str(c) for c in cmd)
                print(f"  run {run + 1} {case:14s} {peer:11s} {fmt(v, kind)}", file=sys.stderr,
                      flush=True)
    info["loadavg_end"] = os.getloadavg()[0]
    if verbs_on or verbs_why:
        info["verbs"] = {"addr": a.verbs_addr, "unavailable": verbs_why,
                         "perftest": perftest_version()}
    info["wall_s"] = round(time.time() - t_start, 1)

    out = {"machine": info, "runs": a.runs, "seconds_per_run": a.time,
           "metric": {"write/read": "bandwidth MiB/s (higher is better)",
                      "lat/gpspm/sendrecv": "8-byte round trip p50 in us (lower is better)",
                      "cpu_s_per_GiB": "client + server CPU seconds per GiB moved (bandwidth "
                                       "cases; lower is better)"},
           "cases": []}
    rows = []
    for case, kind, size, spin in cases:
        # CPU per GiB: the median over the runs, and how it was measured
        cpu, cpu_how = {}, {}
        for p in PEERS:
            vals = [cpu_per_gib(e) for e in extras[(case, p)]] if kind not in LAT_KINDS else []
            vals = [v for v in vals if v[0] is not None]
            cpu[p] = statistics.median(v[0] for v in vals) if vals else None
            cpu_how[p] = vals[0][1] if vals else None
        cpu_ratios = {p: (cpu["rpma"] / cpu[p] if cpu["rpma"] and cpu[p] else None)
                      for p in PEERS[1:]}
        cpu_targets = []
        for tc, tp, rel, val in CPU_TARGETS:
            if tc != case:
                continue
            ratio = cpu_ratios.get(tp)
            met = None if ratio is None else (ratio >= val if rel == ">=" else ratio <= val)
            cpu_targets.append({"peer": tp, "ratio": ratio, "relation": rel, "value": val,
                                "met": met})
        p99 = {p: (statistics.median(e["p99_us"] for e in extras[(case, p)])
                   if kind in LAT_KINDS and extras[(case, p)] and
                   all(e.get("p99_us") is not None for e in extras[(case, p)]) else None)
               for p in PEERS}
        p99_targets = []
        for tc, tp, rel, val in P99_TARGETS:
            if tc != case:
                continue
            ratio = p99["rpma"] / p99[tp] if p99["rpma"] and p99.get(tp) else None
            met = None if ratio is None else (ratio >= val if rel == ">=" else ratio <= val)
            p99_targets.append({"peer": tp, "ratio": ratio, "relation": rel, "value": val,
                                "met": met})
        med = {p: (statistics.median(samples[(case, p)]) if samples[(case, p)] else None)
               for p in PEERS}
        ratios = {p: (med["rpma"] / med[p] if med["rpma"] and med[p] else None)
                  for p in PEERS[1:]}
        targets = []
        for tc, tp, rel, val in TARGETS:
            if tc != case:
                continue
            ratio = ratios.get(tp)
            met = None if ratio is None else (ratio >= val if rel == ">=" else ratio <= val)
            targets.append({"peer": tp, "ratio": ratio, "relation": rel, "value": val,
                            "met": met})
        # issue 11: rpma-shm against every other peer, and its targets
        shm_ratios = {p: (med["rpma-shm"] / med[p] if med["rpma-shm"] and med[p] else None)
                      for p in PEERS if p != "rpma-shm"}
        shm_targets = []
        for tc, tp, ref, rel, val in SHM_TARGETS:
            if tc != case or tp not in peers or (ref and ref not in peers):
                continue
            x = med[tp] if ref is None else (med[tp] / med[ref] if med[tp] and med[ref] else None)
            met = None if x is None else (x >= val if rel == ">=" else x <= val)
            shm_targets.append({"peer": tp, "reference": ref, "ratio": x, "relation": rel,
                                "value": val, "met": met,
                                "failed": [q for q in (tp, ref) if q and errors.get((case, q))
                                           and not samples[(case, q)]]})
        out["cases"].append({
            "case": case, "kind": kind, "size": size, "busy_poll": spin,
            "iodepth": None if kind == "idle" else 1 if kind in LAT_KINDS else DEPTH,
            "ratios_rpma_shm_to": shm_ratios, "shm_targets": shm_targets,
            "median": med, "samples": {p: samples[(case, p)] for p in PEERS},
            "p99_us": p99 if kind in LAT_KINDS else None,
            "p99_targets": p99_targets,
            "cpu_s_per_GiB": cpu if kind not in LAT_KINDS else None,
            "cpu_method": cpu_how if kind not in LAT_KINDS else None,
            "cpu_ratios_rpma_to": cpu_ratios if kind not in LAT_KINDS else None,
            "cpu_targets": cpu_targets,
            "details": {p: extras[(case, p)] for p in PEERS},
            "ratios_rpma_to": ratios, "targets": targets,
            "commands": {p: cmds.get((case, p)) for p in PEERS},
            "errors": {p: errors.get((case, p)) for p in PEERS if errors.get((case, p))}})
        out["cases"][-1].update(verbs_summary(case, kind, samples, extras))
        rows.append((case, kind, med, ratios, targets, p99, cpu, cpu_ratios, cpu_targets,
                     p99_targets, shm_ratios, shm_targets))

    # rpma against rpma in the same run: GPSPM (and send/recv) against write+flush (APM)
    rpma_med = {c["case"]: c["median"]["rpma"] for c in out["cases"]}
    rpma_p99 = {c["case"]: (c["p99_us"] or {}).get("rpma") for c in out["cases"]}
    relative = []
    for tc, rc, rel, val in [t for t in RELATIVE_TARGETS] + \
            [(tc, rc, None, None) for tc, rc in RELATIVE_INFO]:
        if tc not in rpma_med or rc not in rpma_med:
            continue
        x, y = rpma_med[tc], rpma_med[rc]
        ratio = x / y if x and y else None
        met = None if ratio is None or rel is None else \
            (ratio >= val if rel == ">=" else ratio <= val)
        relative.append({"case": tc, "reference": rc, "p50_us": x, "reference_p50_us": y,
                         "p99_us": rpma_p99.get(tc), "reference_p99_us": rpma_p99.get(rc),
                         "ratio": ratio, "relation": rel, "value": val, "met": met})
    out["relative_targets"] = relative

    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")

    def rt(x):
        return "-" if x is None else f"{x:.2f}x"

    def cell(case, kind, med, p):
        """the median, or why there is none: a peer that failed shows as such"""
        if med[p] is None and errors.get((case, p)):
            un = all(e.startswith("unavailable") for e in errors[(case, p)])
            return "unavail." if un else "FAILED"
        return fmt(med[p], kind)

    show_tcp = any(p in TCP_PEERS for p in peers)
    main_rows = [r for r in rows if r[1] != "idle" and r[0] not in verbs_case_names] \
        if show_tcp else []
    if main_rows:
        print_tcp_tables(a, info, main_rows, relative, out, rt, cell)
    shm_rows = [r for r in rows if r[1] != "idle" and r[0] not in verbs_case_names] \
        if set(peers) & set(SHM_PEERS) else []
    if shm_rows:
        print_shm_tables(a, info, shm_rows, rt, cell)
    if verbs_on:
        print_verbs_table(a, info, out, errors)
    idle_rows = [c for c in out["cases"] if c["kind"] == "idle"]
    if idle_rows:
        print_idle_table(idle_rows, errors)
    print(f"\nJSON: {a.out}")
    if a.plot:
        plot(out, a.plot)
    # failed: rpma produced nothing (or rpma-shm, when only it runs; any peer without either)
    subjects = [p for p in ("rpma", "rpma-shm", "rpma-verbs") if p in peers] or peers
    return 1 if errors and not any(samples[(c[0], p)] for c in cases for p in subjects) else 0


def perftest_version():
    try:
        return subprocess.run(["ib_write_bw", "--version"], capture_output=True,
                              text=True).stdout.strip().splitlines()[-1]
    except (OSError, IndexError):
        return None


def verbs_summary(case, kind, samples, extras):
    """issue 20: rpma-verbs against perftest: the ratio of the medians, the ratio in each run
    (the peers alternate within a run), p99 beside p50, and the target"""
    rv, pt = samples[(case, "rpma-verbs")], samples[(case, "perftest")]
    if not rv or not pt:
        return {"verbs_ratio": None, "verbs_target": None}
    ratio = statistics.median(rv) / statistics.median(pt)
    per_run = [x / y if y else None for x, y in zip(rv, pt)]  # where both ran in every run
    target = None
    for name, rel, val in VERBS_TARGETS:
        if case == name:
            met = ratio >= val if rel == ">=" else ratio <= val
            target = {"relation": rel, "value": val, "met": met}
            break
    p99 = None
    if kind in LAT_KINDS:
        p99 = {p: statistics.median(e["p99_us"] for e in extras[(case, p)])
               for p in VERBS_PEERS if extras[(case, p)]}
    up, base = samples[(case, "upstream-verbs")], samples[(case, "base-verbs")]
    return {"verbs_ratio": ratio, "verbs_ratio_per_run": per_run if len(rv) == len(pt) else None,
            "verbs_ratio_to_upstream": statistics.median(rv) / statistics.median(up) if up
            else None,
            "verbs_ratio_to_base": statistics.median(rv) / statistics.median(base) if base
            else None,
            "verbs_ratio_to_base_per_run": [x / y for x, y in zip(rv, base)]
            if base and len(base) == len(rv) else None,
            "verbs_p99_us": p99, "verbs_target": target}


def print_verbs_table(a, info, out, errors):
    """issue 20: rpma over verbs against perftest on the same device, medians of the runs"""
    v = info.get("verbs", {})
    print(f"\nrpma over verbs against perftest on {v.get('addr')} ({v.get('perftest')}): "
          f"medians of {a.runs} runs of {a.time:g} s, the peers alternating, {info['cpus']} "
          f"CPUs; latency = p50 round trip in us (ib_write_lat, ib_send_lat: twice what they "
          f"print), bandwidth in MiB/s at depth {DEPTH}; ratio = rpma / perftest; upstream = "
          f"rpma-perf over upstream librpma, /up = rpma / upstream\n")
    hdr = f"| {'case':20s} | {'perftest':14s} | {'rpma-verbs':>10s} | {'upstream':>10s} | " \
          f"{'perftest':>10s} | {'ratio':>6s} | {'/up':>6s} | {'per run':24s} | " \
          f"{'rpma p99':>8s} | {'pt p99':>8s} | target |"
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    for c in out["cases"]:
        if c["kind"] not in PERFTEST_TOOLS or not (c["samples"]["rpma-verbs"] or
                                                   errors.get((c["case"], "rpma-verbs"))):
            continue
        tool = PERFTEST_TOOLS[c["kind"]] + (" -e" if c["kind"] in LAT_KINDS and
                                            not c["busy_poll"] else "")

        def cell(p):
            if c["median"][p] is None:
                un = all(e.startswith("unavailable") for e in errors.get((c["case"], p), [""]))
                return "unavail." if un and errors.get((c["case"], p)) else \
                    ("FAILED" if errors.get((c["case"], p)) else "-")
            return f"{c['median'][p]:.1f}" if c["kind"] in LAT_KINDS else \
                f"{c['median'][p]:.0f}"
        r = c.get("verbs_ratio")
        ru = c.get("verbs_ratio_to_upstream")
        pr = ",".join("-" if x is None else f"{x:.2f}" for x in c.get("verbs_ratio_per_run") or [])
        t = c.get("verbs_target")
        tg = f"{t['relation']}{t['value']:g}: {verdict(t)}" if t else ""
        p99 = c.get("verbs_p99_us") or {}

        def us(x):
            return "-" if x is None else f"{x:.1f}"
        print(f"| {c['case']:20s} | {tool:14s} | {cell('rpma-verbs'):>10s} | "
              f"{cell('upstream-verbs'):>10s} | {cell('perftest'):>10s} | "
              f"{'-' if r is None else f'{r:.2f}x':>6s} | "
              f"{'-' if ru is None else f'{ru:.2f}x':>6s} | "
              f"{pr:24s} | {us(p99.get('rpma-verbs')):>8s} | {us(p99.get('perftest')):>8s} | "
              f"{tg}")
    for c in out["cases"]:
        rb = c.get("verbs_ratio_to_base")
        if rb is not None:
            runs = ",".join(f"{x:.2f}" for x in c.get("verbs_ratio_to_base_per_run") or [])
            print(f"  {c['case']}: rpma / base-verbs ({a.baseline_lib}) {rb:.2f}x, per run {runs}")


def verdict(t):
    return "met" if t["met"] else ("MISSED" if t["met"] is False else "n/a")


def print_shm_tables(a, info, rows, rt, cell):
    """issue 11: rpma-shm beside rpma (tcp) and the same-host limits"""
    print(f"\nsame host (issue 11): rpma-shm against rpma over tcp and the limits, medians of "
          f"{a.runs} runs of {a.time:g} s, {info['cpus']} CPUs; latency = p50 of an 8-byte "
          "round trip in us (limit: shm ping-pong, spinning for busy-poll, eventfd for "
          "blocking), bandwidth in MiB/s (limit: process_vm_writev streaming)\n")
    hdr = f"| {'case':18s} | {'rpma (tcp)':>11s} | {'rpma-shm':>11s} | {'ping-pong':>11s} | " \
          f"{'memcpy':>11s} | {'pvm-writev':>11s} | {'shm/tcp':>7s} | {'/limit':>6s} | target |"
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    for case, kind, med, _, _, _, _, _, _, _, shm_ratios, shm_targets in rows:
        pp = "shm-spin" if case.endswith("busy_poll") else "shm-eventfd"
        limit = pp if kind in LAT_KINDS else "pvm-writev"
        tg = []
        for t in shm_targets:
            what = f"{t['relation']}{t['value']:g}" + \
                (f"x {t['reference']}" if t["reference"] else " us")
            tg.append(f"{what}: " + (f"n/a ({', '.join(t['failed'])} FAILED)"
                                     if t["failed"] else verdict(t)))
        print(f"| {case:18s} | {cell(case, kind, med, 'rpma'):>11s} | "
              f"{cell(case, kind, med, 'rpma-shm'):>11s} | "
              f"{cell(case, kind, med, pp) if kind in LAT_KINDS else '-':>11s} | "
              f"{cell(case, kind, med, 'memcpy'):>11s} | "
              f"{cell(case, kind, med, 'pvm-writev'):>11s} | {rt(shm_ratios['rpma']):>7s} | "
              f"{rt(shm_ratios[limit]):>6s} | " + ", ".join(tg))
    bw = [r for r in rows if r[1] not in LAT_KINDS]
    if bw:
        print("\nsame host: CPU seconds (client + server) per GiB moved, medians\n")
        print(f"| {'case':18s} | {'rpma (tcp)':>10s} | {'rpma-shm':>8s} | {'memcpy':>7s} | "
              f"{'pvm-writev':>10s} |")
        print(f"|{'-' * 20}|{'-' * 12}|{'-' * 10}|{'-' * 9}|{'-' * 12}|")
        for case, kind, med, _, _, _, cpu, *_ in bw:
            def cs(p):
                return "-" if cpu[p] is None else f"{cpu[p]:.3f}"
            print(f"| {case:18s} | {cs('rpma'):>10s} | {cs('rpma-shm'):>8s} | "
                  f"{cs('memcpy'):>7s} | {cs('pvm-writev'):>10s} |")


def print_idle_table(cases, errors):
    """N idle connections per provider: memory and idle CPU (issue 11 asks for both)"""
    print("\nidle connections (bench/idle_conns), medians: Pss of client + server per connection, "
          "their CPU and wakeups over the idle window\n")
    print(f"| {'case':10s} | {'peer':10s} | {'KiB/conn':>8s} | {'idle CPU':>9s} | "
          f"{'wakeups/s':>9s} | {'threads':>7s} | {'fds':>6s} | {'connect':>8s} |")
    print(f"|{'-' * 12}|{'-' * 12}|{'-' * 10}|{'-' * 11}|{'-' * 11}|{'-' * 9}|{'-' * 8}|"
          f"{'-' * 10}|")
    for c in cases:
        for p in IDLE_PEERS:
            ex = c["details"].get(p) or []
            if not ex:
                if errors.get((c["case"], p)):
                    print(f"| {c['case']:10s} | {p:10s} | {'FAILED':>8s} | {'':9s} | {'':9s} | "
                          f"{'':7s} | {'':6s} | {'':8s} |")
                continue

            def m(k):
                return statistics.median(e[k] for e in ex)
            print(f"| {c['case']:10s} | {p:10s} | {c['median'][p]:8.1f} | "
                  f"{m('idle_cpu_pct'):8.3f}% | {m('wakeups_per_s'):9.1f} | "
                  f"{int(m('threads')):7d} | {int(m('fds')):6d} | {m('connect_s'):7.2f}s |")


def print_tcp_tables(a, info, rows, relative, out, rt, cell):
    print(f"\nrpma vs peers over loopback: medians of {a.runs} runs of {a.time:g} s, "
          f"{info['cpus']} CPUs ({info['cpu_model']}), load {info['loadavg_start']:.1f} -> "
          f"{info['loadavg_end']:.1f}")
    print("bandwidth in MiB/s (iodepth 32); latency = p50 of an 8-byte round trip (rpma lat: "
          "write + flush; gpspm: write + flush request answered by the server's thread; "
          "sendrecv: send answered; raw TCP: ping-pong)\n")
    base = bool(a.baseline_lib)
    hdr = f"| {'case':18s} | {'rpma':>11s} | {'raw TCP':>11s} | {'libfabric':>11s} | " \
          f"{'UCX':>11s} | {'/TCP':>6s} | {'/fabric':>7s} | {'/UCX':>6s} | " + \
          (f"{'rpma base':>11s} | {'/base':>6s} | " if base else "") + "target |"
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    for case, kind, med, ratios, targets, *_ in rows:
        tg = ", ".join(f"{t['peer']} {t['relation']}{t['value']:g}: {verdict(t)}"
                       for t in targets) or ""
        print(f"| {case:18s} | {cell(case, kind, med, 'rpma'):>11s} | "
              f"{cell(case, kind, med, 'tcp'):>11s} | "
              f"{cell(case, kind, med, 'libfabric'):>11s} | {cell(case, kind, med, 'ucx'):>11s} | "
              f"{rt(ratios['tcp']):>6s} | {rt(ratios['libfabric']):>7s} | "
              f"{rt(ratios['ucx']):>6s} | " +
              (f"{cell(case, kind, med, 'rpma_base'):>11s} | {rt(ratios['rpma_base']):>6s} | "
               if base else "") + tg)

    lat_rows = [r for r in rows if r[1] in LAT_KINDS]
    if lat_rows:
        print("\nround trips, p50 / p99 in us (medians over the runs)\n")
        print("(2-msg: raw TCP with the request sent as two writes, as rpma sends write and flush; "
              "spin: the same against a server that never sleeps; the ratios are rpma's)\n")
        print(f"| {'case':18s} | {'rpma p50':>8s} | {'rpma p99':>8s} | {'TCP p50':>8s} | "
              f"{'TCP p99':>8s} | {'p99/TCP':>7s} | {'2-msg p50':>9s} | {'2-msg p99':>9s} | "
              f"{'/2-msg':>13s} | {'spin p50':>8s} | {'spin p99':>8s} | {'/spin':>13s} | target |")
        print(f"|{'-' * 20}|{'-' * 10}|{'-' * 10}|{'-' * 10}|{'-' * 10}|{'-' * 9}|{'-' * 11}|"
              f"{'-' * 11}|{'-' * 15}|{'-' * 10}|{'-' * 10}|{'-' * 15}|--------|")
        for case, kind, med, ratios, targets, p99, _, _, _, p99_targets, *_ in lat_rows:
            def us(x):
                return "-" if x is None else f"{x:.1f}"
            r99 = p99["rpma"] / p99["tcp"] if p99["rpma"] and p99["tcp"] else None
            tg = ", ".join(f"{t['peer']} p99 {t['relation']}{t['value']:g}: {verdict(t)}"
                           for t in p99_targets)
            def against(two):
                return f"{rt(ratios.get(two))} / " + \
                    rt(p99["rpma"] / p99[two] if p99["rpma"] and p99.get(two) else None)
            two, spun = "tcp-2msg", "tcp-2msg-spin"
            print(f"| {case:18s} | {us(med['rpma']):>8s} | {us(p99['rpma']):>8s} | "
                  f"{us(med['tcp']):>8s} | {us(p99['tcp']):>8s} | {rt(r99):>7s} | "
                  f"{us(med[two]):>9s} | {us(p99.get(two)):>9s} | {against(two):>13s} | "
                  f"{us(med.get(spun)):>8s} | {us(p99.get(spun)):>8s} | {against(spun):>13s} | "
                  f"{tg}")
    if relative:
        print("\nrpma against rpma in the same run, p50: GPSPM and send/recv against write+flush "
              "(APM), busy-poll against blocking\n")
        print(f"| {'case':18s} | {'p50':>8s} | {'reference':18s} | {'ref p50':>8s} | "
              f"{'ratio':>6s} | target |")
        print(f"|{'-' * 20}|{'-' * 10}|{'-' * 20}|{'-' * 10}|{'-' * 8}|--------|")
        for t in relative:
            tg = f"{t['relation']}{t['value']:g}: {verdict(t)}" if t["relation"] else ""
            print(f"| {t['case']:18s} | {fmt(t['p50_us'], 'lat'):>8s} | {t['reference']:18s} | "
                  f"{fmt(t['reference_p50_us'], 'lat'):>8s} | {rt(t['ratio']):>6s} | {tg}")
    bw_rows = [r for r in rows if r[1] not in LAT_KINDS]
    if bw_rows:
        print("\nCPU seconds (client + server) per GiB moved, medians; "
              "* = whole processes, set-up included\n")
        print(f"| {'case':18s} | {'rpma':>7s} | {'raw TCP':>7s} | {'fabric':>7s} | "
              f"{'UCX':>7s} | {'/TCP':>6s} | {'/fabric':>7s} | target |")
        print(f"|{'-' * 20}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 8}|{'-' * 9}|"
              "--------|")
        for case, kind, med, ratios, targets, p99, cpu, cpu_ratios, cpu_targets, *_ in bw_rows:
            def cs(p):
                if cpu[p] is None:
                    return "-"
                return f"{cpu[p]:.2f}" + ("*" if cpu_method_of(out, case, p) == "process" else "")
            tg = ", ".join(f"{t['peer']} {t['relation']}{t['value']:g}: {verdict(t)}"
                           for t in cpu_targets)
            print(f"| {case:18s} | {cs('rpma'):>7s} | {cs('tcp'):>7s} | {cs('libfabric'):>7s} | "
                  f"{cs('ucx'):>7s} | {rt(cpu_ratios['tcp']):>6s} | "
                  f"{rt(cpu_ratios['libfabric']):>7s} | {tg}")


if __name__ == "__main__":
    sys.exit(main())
