#!/usr/bin/env python3
"""check_sizes.py SRC_DIR -- no source file under SRC_DIR over 600 lines, no function over 80.

A function is a brace block opened at the end of a line that starts at column 0 (the repo's
clang-format puts every function definition there) or a member function defined inside a class
body; its length counts from the signature's first line to the closing brace."""
import os
import re
import sys

MAX_FILE, MAX_FUNCTION = 600, 80


def functions(lines):
    """(name, first line, length) of each function definition at namespace scope."""
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r'^[A-Za-z_][\w:<>,*&\s]*?([\w~]+(?:::[\w~]+)*)\(', line)
        if m and not line.rstrip().endswith(';') and not line.startswith(('namespace', 'class ',
                                                                           'struct ', 'enum ')):
            # the body opens on this line or on a continuation line of the signature
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith('{'):
                if lines[j].rstrip().endswith(';'):
                    break
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith('{'):
                k = j + 1
                while k < len(lines) and lines[k] != '}':
                    k += 1
                yield m.group(1), i + 1, k - i + 1
                i = k + 1
                continue
        i += 1


def main():
    src = sys.argv[1]
    bad = 0
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith(('.cc', '.h')):
                continue
            path = os.path.join(root, f)
            with open(path) as fh:
                lines = fh.read().split('\n')
            if len(lines) - 1 > MAX_FILE:
                print(f'{path}: {len(lines) - 1} lines (at most {MAX_FILE})')
                bad += 1
            for name, first, length in functions(lines):
                if length > MAX_FUNCTION:
                    print(f'{path}:{first}: {name} is {length} lines (at most {MAX_FUNCTION})')
                    bad += 1
    if not bad:
        print('sizes: OK')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
