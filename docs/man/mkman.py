#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""mkman.py -- writes the section 3 man pages (one per librpma function) into docs/man/man3/.

Usage: python3 docs/man/mkman.py [OUTDIR]

The page texts are in pages.py (same folder). Each SYNOPSIS is cut from include/librpma.h, so it
cannot drift from the header. The output is checked in; tests/man checks that it is up to date.
librpma(7) is written directly in roff (man7/); rpma-perf(1) (man1/) is made by
tools/rpma-perf/mkcli.py, from the same source as its --help, with the helpers below.

Markup in the texts (pages.py):
  [[rpma_flush]]    a reference: bold name and section, (3) for rpma_*, (7) for librpma
  [[msync(2)]]      a reference with an explicit section
  **X**             bold (constants, types, the page's own function)
  {arg}             italic (argument names)
  blank line        new paragraph
  "- " lines        a bullet list (continuation lines indented)
  "= term" lines    a tagged list: the term, then its text on the following lines
  "$ " lines        verbatim (code)
"""
import os
import re
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HEADER = os.path.join(ROOT, "include", "librpma.h")

sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree (ctest runs this too)
import pages  # noqa: E402  (the page texts)

# Fixed, so regenerating gives the same bytes; bump it when the pages change in substance.
DATE = pages.DATE
SOURCE = "rpma 1.3"
VOLUME = "rpma Programmer's Manual"


def esc(text):
    """Plain text to roff: backslashes, and control characters at the start of a line."""
    text = text.replace("\\", "\\e")
    return "\n".join("\\&" + ln if ln[:1] in (".", "'") else ln for ln in text.split("\n"))


def inline(text):
    text = esc(text)

    def ref(m):
        name, sec = m.group(1), m.group(2)
        if sec is None:
            sec = "7" if name == "librpma" else "1" if name == "rpma-perf" else "3"
        return "\\fB%s\\fP(%s)" % (name, sec)

    text = re.sub(r"\[\[([A-Za-z0-9_.-]+)(?:\((\d)\))?\]\]", ref, text)
    text = re.sub(r"\*\*(.+?)\*\*", r"\\fB\1\\fP", text)
    text = re.sub(r"\{([*A-Za-z0-9_>.\[\]-]+)\}", r"\\fI\1\\fP", text)
    # a minus sign before a number, not a hyphen
    text = re.sub(r"(^|[\s(])-(\d)", r"\1\\-\2", text)
    return text


def fill(text):
    """Roff text to source lines: one sentence per line, none over 80 columns."""
    out = []
    for sentence in re.split(r"(?<=[.;:])\s+(?=[A-Z\\{*])", text.strip()):
        out += textwrap.wrap(sentence, 80, break_long_words=False, break_on_hyphens=False)
    return "\n".join("\\&" + ln if ln[:1] in (".", "'") else ln for ln in out)


def blocks(text):
    """Section text to roff: paragraphs, bullet lists, tagged lists, verbatim blocks."""
    out = []
    paras = [p for p in re.split(r"\n\s*\n", text.strip("\n")) if p.strip()]
    for i, para in enumerate(paras):
        lines = para.split("\n")
        if lines[0].startswith("$ "):
            out += [".PP" if i else None, ".RS 4", ".nf"]
            out += [esc(ln[2:]) for ln in lines]
            out += [".fi", ".RE"]
        elif lines[0].startswith("- "):
            items = []
            for ln in lines:
                if ln.startswith("- "):
                    items.append(ln[2:].strip())
                else:
                    items[-1] += " " + ln.strip()
            for it in items:
                out += [".IP \\(bu 2", fill(inline(it))]
        elif lines[0].startswith("= "):
            items = []
            for ln in lines:
                if ln.startswith("= "):
                    items.append([ln[2:].strip(), ""])
                else:
                    items[-1][1] += (" " if items[-1][1] else "") + ln.strip()
            for term, body in items:
                out += [".TP", inline(term), fill(inline(body))]
        else:
            if i:
                out.append(".PP")
            out.append(fill(inline(" ".join(ln.strip() for ln in lines))))
    return [ln for ln in out if ln is not None]


# ---- the header ----------------------------------------------------------------------------

def read_header():
    with open(HEADER, encoding="utf-8") as f:
        src = f.read()
    return re.sub(r"/\*.*?\*/", "", src, flags=re.S)


def prototype(hdr, name):
    m = re.search(r"^((?:const )?[a-z]+ \*?)" + name + r"\((.*?)\);", hdr, re.S | re.M)
    if not m:
        sys.exit("mkman: %s is not declared in include/librpma.h" % name)
    ret = m.group(1)
    params = [" ".join(p.split()) for p in m.group(2).split(",")]
    return ret, params


def declaration(hdr, what):
    """An enum, struct, typedef or #define of the header, as the SYNOPSIS shows it."""
    kind, name = what.split(" ", 1)
    if kind in ("enum", "struct"):
        m = re.search(r"^%s %s \{.*?\};" % (kind, name), hdr, re.S | re.M)
        if not m:
            m = re.search(r"^%s %s;" % (kind, name), hdr, re.M)
    elif kind == "typedef":
        m = re.search(r"^typedef [^;]*\b%s\([^;]*\);" % name, hdr, re.S | re.M)
    elif kind == "#define":
        m = re.search(r"^#define %s\b.*$" % name, hdr, re.M)
    else:
        m = None
    if not m:
        sys.exit("mkman: %s is not in include/librpma.h" % what)
    lines = []
    for ln in m.group(0).split("\n"):
        ln = ln.rstrip().replace("\t", "    ")
        if kind == "typedef" and ln.startswith("    "):
            ln = "        " + ln.strip()
        if kind in ("enum", "struct") and ln.startswith("    "):
            ln = "    " + " ".join(ln.split())
        if ln.startswith("#define"):
            ln = " ".join(ln.split())
        lines.append(ln)
    return lines


def param_roff(p):
    """'const struct rpma_conn *conn' -> the type plain, the name italic."""
    m = re.match(r"(.*?)([A-Za-z_][A-Za-z0-9_]*)(\[\d+\])?$", p)
    typ, name, arr = m.group(1), m.group(2), m.group(3) or ""
    return typ, name, arr


def synopsis(hdr, name, extra):
    out = [".nf", ".B #include <librpma.h>"]
    for what in extra:
        out.append(".PP")
        out += [esc(ln) for ln in declaration(hdr, what)]
    out.append(".PP")
    ret, params = prototype(hdr, name)
    # wrap at 78 columns of rendered text, continuation lines indented by 8
    head = "%s\\fB%s\\fP(" % (esc(ret), name)
    width = len(ret) + len(name) + 1
    line, lines = head, []
    for i, p in enumerate(params):
        typ, pname, arr = param_roff(p)
        piece = "%s\\fI%s\\fP%s" % (esc(typ), pname, arr) + (");" if i == len(params) - 1 else ",")
        plen = len(typ) + len(pname) + len(arr) + (2 if i == len(params) - 1 else 1)
        sep = "" if line == head else " "
        if width + len(sep) + plen > 78 and line != head:
            lines.append(line)
            line, width, sep = "        ", 8, ""
        line += sep + piece
        width += len(sep) + plen
    lines.append(line)
    out += lines
    out.append(".fi")
    return out


# ---- a page ----------------------------------------------------------------------------------

def render(hdr, page):
    name = page["name"]
    out = [
        '.\\" SPDX-License-Identifier: BSD-3-Clause',
        '.\\" Generated by docs/man/mkman.py from docs/man/pages.py; edit those, not this file.',
        '.TH %s 3 %s "%s" "%s"' % (name.upper(), DATE, SOURCE, VOLUME),
        ".nh",  # no hyphenation: names and arguments are easier to read whole
        ".ad l",
        ".SH NAME",
        "%s \\- %s" % (name, esc(page["summary"])),
        ".SH SYNOPSIS",
    ]
    out += synopsis(hdr, name, page.get("extra", []))
    out += [".SH DESCRIPTION"] + blocks(page["desc"])
    out += [".SH RETURN VALUE"] + blocks(page["ret"])
    if page.get("errors"):
        out += [".SH ERRORS", inline("**%s**() can fail with the following errors:" % name)]
        for code, why in page["errors"]:
            out += [".TP", ".B " + code, fill(inline(why))]
    if page.get("notes"):
        out += [".SH NOTES"] + blocks(page["notes"])
    see = sorted(set(page.get("see", [])) - {name})
    refs = ["[[%s]]" % s for s in see] + ["[[librpma]]"]
    out += [".SH SEE ALSO", inline(",\n".join(refs))]
    return "\n".join(out) + "\n"


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "man3")
    os.makedirs(outdir, exist_ok=True)
    hdr = read_header()
    names = set()
    for page in pages.PAGES:
        if page["name"] in names:
            sys.exit("mkman: two pages for %s" % page["name"])
        names.add(page["name"])
        with open(os.path.join(outdir, page["name"] + ".3"), "w", encoding="utf-8") as f:
            f.write(render(hdr, page))
    # a page removed from pages.py must not linger in the output
    for fn in os.listdir(outdir):
        if fn.endswith(".3") and fn[:-2] not in names:
            os.remove(os.path.join(outdir, fn))


if __name__ == "__main__":
    main()
