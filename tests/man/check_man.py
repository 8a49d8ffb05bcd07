#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""check_man.py -- checks the man pages in docs/man.

  check_man.py lint --mandoc PATH   every page renders with no mandoc warning or error
  check_man.py coverage             every exported function has its page; pages name only
                                    functions, types and constants of librpma.h, environment
                                    variables the library reads, and pages that exist
  check_man.py generated            docs/man/man3 is what docs/man/mkman.py makes of pages.py

Whether each error a page lists is one its function can return is checked by hand (see
docs/man/pages.py); a script cannot read that out of the code.
"""
import argparse
import filecmp
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAN = os.path.join(ROOT, "docs", "man")

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def pages():
    found = sorted(glob.glob(os.path.join(MAN, "man[0-9]", "*.[0-9]")))
    if not found:
        fail("no man pages under " + MAN)
    return found


def rel(path):
    return os.path.relpath(path, ROOT)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def plain(roff):
    """Roff source to the words a reader sees: comments, font and other escapes removed."""
    # comments, and the title line (the page name in capitals)
    roff = "\n".join(ln for ln in roff.split("\n")
                     if not ln.startswith('.\\"') and not ln.startswith(".TH "))
    roff = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", roff)
    roff = roff.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\").replace("\\(bu", "")
    return re.sub(r"\\%", "", roff)


def section(roff, name):
    m = re.search(r"^\.SH \"?%s\"?\n(.*?)(?=^\.SH |\Z)" % re.escape(name), roff, re.S | re.M)
    return m.group(1) if m else None


# ---- lint --------------------------------------------------------------------------------------

def lint(mandoc):
    if not mandoc or mandoc.endswith("NOTFOUND") or not os.path.exists(mandoc):
        fail("mandoc not found; install it (scripts/install-deps.sh) and reconfigure")
        return
    for p in pages():
        r = subprocess.run([mandoc, "-T", "lint", "-W", "warning", p], capture_output=True,
                           text=True)
        out = (r.stdout + r.stderr).strip()
        if r.returncode != 0 or out:
            fail("%s: mandoc -T lint -W warning (exit %d):\n%s" % (rel(p), r.returncode, out))
    print("lint: %d pages" % len(pages()))


# ---- coverage ----------------------------------------------------------------------------------

def exported():
    text = read(os.path.join(ROOT, "src", "librpma.map"))
    return sorted(set(re.findall(r"^\s+(rpma_[a-z0-9_]+);", text, re.M)))


def header_names():
    src = re.sub(r"/\*.*?\*/", "", read(os.path.join(ROOT, "include", "librpma.h")), flags=re.S)
    return set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", src))


def env_vars():
    """RPMA_* names the library passes to getenv: string literals in src/."""
    names = set()
    for path in glob.glob(os.path.join(ROOT, "src", "**", "*.cc"), recursive=True):
        names |= set(re.findall(r'"(RPMA_[A-Z0-9_]+)"', read(path)))
    return names


def prototype_ok(header, synopsis, name):
    """The prototype the page shows is the header's, up to white space."""
    norm = lambda s: re.sub(r"\s+", " ", s).replace("( ", "(").replace(" )", ")").strip()
    m = re.search(r"((?:const )?[a-z]+ \*?%s\(.*?\);)" % name, norm(plain(synopsis)))
    return bool(m) and m.group(1) in norm(header)


def coverage():
    syms = exported()
    if len(syms) != 84:
        fail("src/librpma.map exports %d functions, not 84" % len(syms))
    names = header_names()
    envs = env_vars()
    header = re.sub(r"/\*.*?\*/", "", read(os.path.join(ROOT, "include", "librpma.h")),
                    flags=re.S)

    for sym in syms:
        path = os.path.join(MAN, "man3", sym + ".3")
        if not os.path.exists(path):
            fail("%s has no page (docs/man/man3/%s.3)" % (sym, sym))
            continue
        roff = read(path)
        name = section(roff, "NAME")
        named = re.split(r"\s*,\s*", plain(name or "").split(" - ")[0].strip())
        if sym not in named:
            fail("%s: the NAME section does not name %s" % (rel(path), sym))
        syn = section(roff, "SYNOPSIS")
        if not syn or not prototype_ok(header, syn, sym):
            fail("%s: the SYNOPSIS does not show the prototype of librpma.h" % rel(path))

    for path in glob.glob(os.path.join(MAN, "man3", "*.3")):
        if os.path.basename(path)[:-2] not in syms:
            fail("%s documents no exported function" % rel(path))

    for path in pages():
        roff = read(path)
        text = plain(roff)
        for tok in sorted(set(re.findall(r"(?<![A-Za-z0-9_])rpma_[a-z0-9_]+\*?", text))):
            if tok.endswith("*"):  # a family, as in rpma_ep_*
                if not any(n.startswith(tok[:-1]) for n in names):
                    fail("%s: %s matches nothing in librpma.h" % (rel(path), tok))
            elif tok not in names:
                fail("%s: %s is not a function, type or enum of librpma.h" % (rel(path), tok))
        for tok in sorted(set(re.findall(r"(?<![A-Za-z0-9_])RPMA_E_[A-Z_]+", text))):
            if tok not in names:
                fail("%s: %s is not an error code of librpma.h" % (rel(path), tok))
        for tok in sorted(set(re.findall(r"(?<![A-Za-z0-9_])RPMA_[A-Z0-9_]+", text))):
            if tok not in names and tok not in envs:
                fail("%s: %s is neither in librpma.h nor an environment variable the library "
                     "reads" % (rel(path), tok))
        # references to our own pages must lead somewhere
        for ref, sec in set(re.findall(r"\\fB((?:rpma_|librpma|rpma\\-perf)[A-Za-z0-9_\\-]*)"
                                       r"\\fP\((\d)\)", roff) +
                            re.findall(r"^\.BR ((?:rpma_|librpma|rpma\\-perf)[A-Za-z0-9_\\-]*) "
                                       r"\((\d)\)", roff, re.M)):
            ref = ref.replace("\\-", "-")
            if not os.path.exists(os.path.join(MAN, "man" + sec, "%s.%s" % (ref, sec))):
                fail("%s: refers to %s(%s), which has no page" % (rel(path), ref, sec))

    # the overview lists every function
    overview = plain(read(os.path.join(MAN, "man7", "librpma.7")))
    for sym in syms:
        if not re.search(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % sym, overview):
            fail("librpma(7) does not list %s" % sym)
    print("coverage: %d functions, %d pages" % (len(syms), len(pages())))


# ---- generated ---------------------------------------------------------------------------------

def generated():
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([sys.executable, os.path.join(MAN, "mkman.py"), tmp],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("mkman.py failed:\n" + r.stdout + r.stderr)
            return
        made = sorted(os.listdir(tmp))
        have = sorted(os.path.basename(p) for p in glob.glob(os.path.join(MAN, "man3", "*.3")))
        for fn in sorted(set(made) ^ set(have)):
            fail("docs/man/man3/%s is %s" % (fn, "missing" if fn in made else "not generated"))
        for fn in sorted(set(made) & set(have)):
            if not filecmp.cmp(os.path.join(tmp, fn), os.path.join(MAN, "man3", fn),
                               shallow=False):
                fail("docs/man/man3/%s differs from what mkman.py makes" % fn)
    if failures:
        print("regenerate with: python3 docs/man/mkman.py")
    print("generated: %d pages compared" % len(made))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("check", choices=["lint", "coverage", "generated"])
    ap.add_argument("--mandoc", default="mandoc")
    a = ap.parse_args()
    {"lint": lambda: lint(a.mandoc), "coverage": coverage, "generated": generated}[a.check]()
    if failures:
        print("%d problem(s)" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
