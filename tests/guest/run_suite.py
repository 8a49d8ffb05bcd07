#!/usr/bin/env python3
"""run_suite.py -- runs the black-box part of a build's ctest suite, inside the soft-RoCE guest.

ctest itself cannot scale the TIMEOUT properties for an emulated machine, so this reads the
suite from `ctest --show-only=json-v1` and runs each test the way ctest would (its command,
environment, working directory, skip code), with every bound multiplied by --scale.

Which tests: those with every label of --labels (regular expressions, as ctest -L), less the
exempt ones (exempt.txt: a name pattern and the reason per line). With --library reference the
programs load Debian's librpma.so.0 (the oracle) instead of the build's, and the run first checks
that they really do.
"""
import argparse
import concurrent.futures
import json
import os
import re
import resource
import subprocess
import sys
import time

REFERENCE_DIR = "/usr/lib/x86_64-linux-gnu"


def load_exempt(path):
    exempt = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            pattern, _, reason = line.partition(" ")
            if not reason.strip():
                sys.exit(f"run_suite: {path}: '{pattern}' gives no reason")
            exempt.append((re.compile(pattern), reason.strip()))
    return exempt


def props(test):
    return {p["name"]: p["value"] for p in test.get("properties", [])}


def select(tests, labels, exclude, exempt, name_filter):
    chosen, skipped = [], []
    for t in tests:
        p = props(t)
        if p.get("DISABLED"):
            continue
        have = p.get("LABELS", [])
        if not all(any(re.search(rx, lab) for lab in have) for rx in labels):
            continue
        if any(re.search(rx, lab) for rx in exclude for lab in have):
            continue
        if name_filter and not re.search(name_filter, t["name"]):
            continue
        why = next((r for rx, r in exempt if rx.fullmatch(t["name"])), None)
        if why:
            skipped.append((t["name"], why))
        else:
            chosen.append(t)
    return chosen, skipped


def check_reference(tests, env):
    """every program must resolve librpma.so.0 to Debian's, never to the build's"""
    exe = tests[0]["command"][0] if tests else None
    for t in tests:  # a runner script's first argument is the program
        cmd = [c for c in t["command"] if os.path.isfile(c) and os.access(c, os.X_OK)]
        elf = [c for c in cmd if open(c, "rb").read(4) == b"\x7fELF"]
        if elf:
            exe = elf[0]
            break
    out = subprocess.run(["ldd", exe], env=env, capture_output=True, text=True).stdout
    line = next((l for l in out.splitlines() if "librpma.so.0" in l), "")
    want = os.path.join(REFERENCE_DIR, "librpma.so.0")
    if want not in line:
        sys.exit(f"run_suite: {exe} does not load the reference ({line.strip() or 'no librpma'})")
    owner = subprocess.run(["dpkg", "-S", want], capture_output=True, text=True).stdout
    if not owner.startswith("librpma0"):
        sys.exit(f"run_suite: {want} is not Debian's librpma0 ({owner.strip()})")
    print(f"run_suite: the oracle: {want} from {owner.split(':')[0]}", flush=True)


def run_one(t, base_env, scale, overrides):
    p = props(t)
    env = dict(base_env)
    for kv in p.get("ENVIRONMENT", []) + overrides:
        k, _, v = kv.partition("=")
        env[k] = v
    env["RPMA_TEST_TIME_SCALE"] = str(scale)  # the runners and programs scale their own bounds
    limit = float(p.get("TIMEOUT", 1500)) * scale
    start = time.monotonic()
    try:
        r = subprocess.run(t["command"], cwd=p.get("WORKING_DIRECTORY"), env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=limit,
                           start_new_session=True)
        out, rc = r.stdout.decode(errors="replace"), r.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") + f"\n(timed out after {limit:.0f} s)"
        rc = None
    secs = time.monotonic() - start
    skip_rc = p.get("SKIP_RETURN_CODE")
    if rc is not None and skip_rc is not None and rc == int(skip_rc):
        verdict = "skip"
    elif rc is not None and any(re.search(rx, out) for rx in p.get("SKIP_REGULAR_EXPRESSION", [])):
        verdict = "skip"
    else:
        ok = rc == 0
        if p.get("PASS_REGULAR_EXPRESSION"):
            ok = rc is not None and any(re.search(rx, out) for rx in p["PASS_REGULAR_EXPRESSION"])
        if p.get("WILL_FAIL"):
            ok = not ok
        verdict = "pass" if ok else "FAIL"
    return t["name"], verdict, secs, rc, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="the build folder (its ctest suite)")
    ap.add_argument("--labels", action="append", default=[], help="a label regex; all must match")
    ap.add_argument("--exclude-labels", action="append", default=[],
                    help="a label regex; a test with any matching label is left out")
    ap.add_argument("--exempt", help="exempt list: NAME_REGEX REASON per line")
    ap.add_argument("--filter", help="only tests whose name matches this regex")
    ap.add_argument("--library", choices=["reference", "build"], default="build")
    ap.add_argument("--scale", type=int, default=4, help="multiplies every time bound")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for every test")
    ap.add_argument("--provider", help="RPMA_PROVIDER for every test, over the test's own")
    ap.add_argument("--list", action="store_true", help="print what would run, run nothing")
    a = ap.parse_args()

    suite = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], cwd=a.build,
                                      capture_output=True, check=True).stdout)
    exempt = load_exempt(a.exempt) if a.exempt else []
    tests, skipped = select(suite["tests"], a.labels, a.exclude_labels, exempt, a.filter)
    if not tests:
        sys.exit("run_suite: no test selected")

    env = dict(os.environ)
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    if a.library == "reference":
        env["LD_LIBRARY_PATH"] = REFERENCE_DIR  # it comes before the programs' RUNPATH
        # a test may expect what the man pages say where the reference deliberately differs
        # (docs/testing.md lists each case)
        env["RPMA_TEST_REFERENCE"] = "1"
        check_reference(tests, env)
    # verbs takes more descriptors per connection than tcp; the guest's root may raise the limit
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for want in (1 << 20, 65536, hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
            break
        except (ValueError, OSError):
            continue
    for name, why in skipped:
        print(f"exempt  {name}: {why}")
    if a.list:
        for t in tests:
            print(f"would run {t['name']}")
        return 0

    failed, counts = [], {"pass": 0, "skip": 0, "FAIL": 0}
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        overrides = [f"RPMA_PROVIDER={a.provider}"] if a.provider else []
        futures = [pool.submit(run_one, t, env, a.scale, overrides) for t in tests]
        for f in concurrent.futures.as_completed(futures):
            name, verdict, secs, rc, out = f.result()
            counts[verdict] += 1
            print(f"{verdict:5s} {name} ({secs:.1f} s)", flush=True)
            if verdict == "FAIL":
                failed.append(name)
                tail = "\n".join(out.splitlines()[-40:])
                print(f"----- {name}: exit {rc}\n{tail}\n-----", flush=True)
            elif verdict == "skip":
                print(f"      {out.strip().splitlines()[-1] if out.strip() else ''}", flush=True)
    print(f"run_suite: {counts['pass']} passed, {counts['skip']} skipped, {counts['FAIL']} failed, "
          f"{len(skipped)} exempt, in {time.monotonic() - start:.0f} s")
    for name in sorted(failed):
        print(f"  failed: {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
