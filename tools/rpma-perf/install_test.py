#!/usr/bin/env python3
"""install_test.py CMAKE BUILD_DIR VERSION -- rpma-perf installs, runs and documents itself.

`cmake --install BUILD_DIR --prefix TMP` must put rpma-perf in TMP/bin and rpma-perf(1) in
TMP/share/man/man1; the installed binary must load the installed librpma.so.0 (no
LD_LIBRARY_PATH), print its version with --version and its help with --help; and the installed
man page and the help must name the same commands and the same options.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

cmake, build, version = sys.argv[1:4]
failures = []


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL: " + msg)


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


tmp = tempfile.mkdtemp(prefix="rpma_perf_install.")
try:
    r = run([cmake, "--install", build, "--prefix", tmp])
    check(r.returncode == 0, "cmake --install failed:\n" + r.stdout + r.stderr)
    perf = os.path.join(tmp, "bin", "rpma-perf")
    page = os.path.join(tmp, "share", "man", "man1", "rpma-perf.1")
    check(os.access(perf, os.X_OK), "no executable %s" % perf)
    check(os.path.isfile(page), "no man page %s" % page)
    if failures:
        sys.exit(1)

    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    r = run(["ldd", perf], env)
    m = re.search(r"librpma\.so\.0 => (\S+)", r.stdout)
    where = os.path.realpath(m.group(1)) if m else "nowhere"
    check(where.startswith(os.path.realpath(tmp) + "/"),
          "the installed rpma-perf loads librpma.so.0 from %s, not from the prefix" % where)

    r = run([perf, "--version"], env)
    check(r.returncode == 0 and r.stdout.strip() == "rpma-perf " + version,
          "--version: exit %d, %r (expected 'rpma-perf %s')" % (r.returncode, r.stdout, version))
    r = run([perf, "--help"], env)
    check(r.returncode == 0 and "usage:" in r.stdout, "--help: exit %d" % r.returncode)
    help_text = r.stdout

    with open(page, encoding="utf-8") as f:
        roff = f.read()
    # commands: the help's usage lines and the page's SYNOPSIS
    help_cmds = set(re.findall(r"^  rpma-perf ([a-z]+)", help_text, re.M))
    page_cmds = set(re.findall(r"\\fBrpma\\-perf ([a-z]+)\\fP", roff))
    check(help_cmds and help_cmds == page_cmds,
          "commands: --help has %s, the page %s" % (sorted(help_cmds), sorted(page_cmds)))
    # options: "-x, --name ARG" in the help, ".BR \-x ", " \-\-name ..." in the page
    help_opts = set(re.findall(r"^  (-\w), (--[\w-]+)(?: (\S+))?", help_text, re.M))
    page_opts = set()
    for short, long_, arg in re.findall(
            r'^\.BR \\-(\w) ", " \\-\\-([\w\\-]+)(?: " (.*)")?$', roff, re.M):
        arg = re.sub(r"\\f[BIP]", "", arg)
        page_opts.add(("-" + short, "--" + long_.replace("\\-", "-"), arg))
    check(help_opts and help_opts == page_opts,
          "options differ: only in --help %s, only in the page %s"
          % (sorted(help_opts - page_opts), sorted(page_opts - help_opts)))
    # the tour takes --port (the two used to disagree)
    check(re.search(r"^  rpma-perf tour .*--port", help_text, re.M) is not None,
          "--help: tour without --port")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print("FAILED" if failures else "ok: installed rpma-perf runs; --help and rpma-perf(1) agree")
sys.exit(1 if failures else 0)
