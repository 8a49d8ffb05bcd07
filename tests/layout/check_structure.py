#!/usr/bin/env python3
"""check_structure.py SRC_DIR CEILINGS.json -- issue 21's structure targets, as ceilings that only
go down (docs/rc-rebuild.md, step a):
  - methods per class in SRC_DIR: at most 30, or the class's ceiling;
  - mutexes declared per file under SRC_DIR/provider: at most 2, or the file's ceiling;
  - `friend` and `thread_local` per file: none, or the file's ceiling;
  - each lending identifier of the old engine: at most its ceiling of uses (0 when gone).
A count above its ceiling fails; a count below an explicit ceiling fails too, so the commit that
earns a lower figure lowers the ceiling with it.

check_structure.py --self-test FIXTURES_DIR: the fixture class with 31 methods must be counted
31 and fail the default limit, and the same class without its last method 30 and pass (the
counter's own test).

Counting rule (docs/rc-rebuild.md, section 1): comments and literals stripped; in a class or
struct body, at its own brace depth, every member function declaration or inline definition
counts (constructors, destructors, operators, each overload); `= delete`, data members, using
and friend declarations, and the members of nested classes do not. Mutexes are declarations of
std::mutex, std::shared_mutex, std::recursive_mutex or RankedMutex."""
import json
import os
import re
import sys

DEFAULT_METHODS, DEFAULT_MUTEXES = 30, 2
MUTEX_RE = re.compile(r'\b(?:std::(?:recursive_|shared_)?mutex|RankedMutex)\s+(?:\w+\s*::\s*)*'
                      r'\w+\s*(?:[;{=(\[]|,)')


def strip(text):
    """the source without comments, string and character literals (newlines kept)"""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            seg = text[i:n if j < 0 else j + 2]
            out.append('\n' * seg.count('\n'))
            i = n if j < 0 else j + 2
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def drop_templates(s):
    """s with <...> argument lists removed (so commas and parentheses inside do not count)"""
    prev = None
    while prev != s:
        prev = s
        s = re.sub(r'<[^<>;{}]*>', '', s)
    return s


def is_method(stmt):
    s = ' '.join(drop_templates(stmt).split())
    s = re.sub(r'^(?:public|private|protected)\s*:\s*', '', s)
    if not s or re.match(r'(?:using|typedef|friend|static_assert|enum|template\s*$)\b', s):
        return False
    if re.search(r'=\s*delete\s*$', s):
        return False
    s = re.sub(r'^template\s*', '', s)
    m = re.search(r'(operator\s*(?:\(\)|[^\s(]+)|~?\w+)\s*\(', s)
    if not m:
        return False
    head = s[:m.start()]
    if '=' in head or '{' in head:  # a data member with an initializer
        return False
    after = s[m.end():].lstrip()
    if after.startswith('*') or after.startswith('&'):  # a pointer to function, as a member
        return False
    return m.group(1) not in ('alignas', 'decltype', 'sizeof', 'noexcept')


def classes(text):
    """(qualified name, line, method count) of every class and struct body in stripped text"""
    found = []
    # namespace names in front of the class: enough for this repo's one-namespace-per-file
    ns_stack = []
    pattern = re.compile(r'\b(namespace|class|struct|union)\s+([\w:]*)\s*(?:final\s*)?'
                         r'(?::[^;{]*)?\{')
    i = 0
    depth = 0
    while True:
        m = pattern.search(text, i)
        # track namespace closings between i and m
        end = m.start() if m else len(text)
        for ch in text[i:end]:
            if ch == '{':
                depth += 1
            elif ch == '}':
                depth -= 1
                while ns_stack and ns_stack[-1][1] > depth:
                    ns_stack.pop()
        if not m:
            break
        kind, name = m.group(1), m.group(2)
        body_start = m.end()
        if kind == 'namespace':
            depth += 1
            ns_stack.append((name, depth))
            i = body_start
            continue
        count, j = count_body(text, body_start)
        qual = '::'.join([n for n, _ in ns_stack if n] + [name or '<anonymous>'])
        qual = re.sub(r'^rpma::', '', qual)
        found.append((qual, text.count('\n', 0, m.start()) + 1, count))
        i = j  # past the body; nested classes were skipped by count_body
    return found


def count_body(text, k):
    """(methods, index past the closing brace) of the class body that starts at k"""
    count, stmt = 0, []
    n = len(text)
    while k < n:
        c = text[k]
        if c == '{':
            head = ''.join(stmt)
            if re.search(r'\b(?:class|struct|union|enum)\b[^;(]*$', head) and '(' not in head:
                # a nested type: skip its body, it is not this class's method
                k = skip_block(text, k)
                stmt = []
                continue
            if is_method(head):
                count += 1
            k = skip_block(text, k)
            # an inline definition ends the statement; `{}` initializers end with ';' later
            if re.search(r'\)\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?:final\s*)?'
                         r'(?:->[^{]*)?\s*(?::[^{]*)?$', ' '.join(head.split())):
                stmt = []
            else:
                stmt.append('{}')
            continue
        if c == '}':
            return count, k + 1
        if c == ';':
            if is_method(''.join(stmt)):
                count += 1
            stmt = []
        elif c == ':' and re.search(r'\b(?:public|private|protected)\s*$', ''.join(stmt)) and \
                not text.startswith('::', k):
            stmt = []
        else:
            stmt.append(c)
        k += 1
    return count, n


def skip_block(text, k):
    d = 0
    while k < len(text):
        if text[k] == '{':
            d += 1
        elif text[k] == '}':
            d -= 1
            if d == 0:
                return k + 1
        k += 1
    return k


def measure(src):
    methods, mutexes, friends, idents = {}, {}, {}, {}
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith(('.cc', '.h')):
                continue
            path = os.path.join(root, f)
            rel = 'src/' + os.path.relpath(path, src)  # as the ceilings name it
            with open(path) as fh:
                text = strip(fh.read())
            if f.endswith('.h'):
                for name, line, count in classes(text):
                    methods[f'{name} ({rel}:{line})'] = count
            if '/provider/' in '/' + rel:
                mutexes[rel] = len(MUTEX_RE.findall(text))
            n = len(re.findall(r'\bfriend\b', text)) + len(re.findall(r'\bthread_local\b', text))
            if n:
                friends[rel] = n
            for ident in LENDING:
                k = len(re.findall(rf'\b{ident}\b', text))
                if k:
                    idents[ident] = idents.get(ident, 0) + k
    return methods, mutexes, friends, idents


LENDING = ['lent', 'backoff', 'check_paused', 'corked', 'drain_wait', 'after_drive_',
           'lent_check', 'lent_used', 'waiter_serves_', 'empty_polls_', 't_driving']


def judge(figures, ceilings):
    methods, mutexes, friends, idents = figures
    bad = []

    def key_of(label):
        return label.split(' (')[0]

    mc = ceilings.get('methods', {})
    for label, count in sorted(methods.items()):
        cap = mc.get(key_of(label), DEFAULT_METHODS)
        if count > cap:
            bad.append(f'{label}: {count} methods, more than {cap}')
        elif key_of(label) in mc and count < cap:
            bad.append(f'{label}: {count} methods, below its ceiling {cap}: lower the ceiling')
    for name in mc:
        if not any(key_of(l) == name for l in methods):
            bad.append(f'methods ceiling for {name}, a class no longer found: remove it')
    for table, counts, default, what in (('mutexes', mutexes, DEFAULT_MUTEXES, 'mutexes'),
                                         ('friend_thread_local', friends, 0,
                                          'friend/thread_local'),
                                         ('lending', idents, 0, 'uses')):
        caps = ceilings.get(table, {})
        for k, count in sorted(counts.items()):
            cap = caps.get(k, default)
            if count > cap:
                bad.append(f'{k}: {count} {what}, more than {cap}')
            elif k in caps and count < cap:
                bad.append(f'{k}: {count} {what}, below its ceiling {cap}: lower the ceiling')
        for k, cap in caps.items():
            if k not in counts and cap > 0:
                bad.append(f'{k}: none left, ceiling {cap}: remove the ceiling')
    return bad


def self_test(fixtures):
    bad = []
    f = 'too_many_methods.h'
    with open(os.path.join(fixtures, f)) as fh:
        text = fh.read()
    last = text.rindex('    int m')  # the last method: without it the class has 30
    cut = text[:last] + text[text.index('\n', last) + 1:]
    for src, want in ((text, 31), (cut, 30)):
        found = classes(strip(src))
        counts = [c for _, _, c in found]
        if counts[:1] != [want]:
            bad.append(f'{f}: counted {counts}, expected {want} for its first class')
        verdict = judge(({f'{n} ({f}:{l})': c for n, l, c in found[:1]}, {}, {}, {}), {})
        if bool(verdict) != (want > DEFAULT_METHODS):
            bad.append(f'{f}: verdict {verdict or "pass"} for {want} methods')
    for b in bad:
        print('FAIL', b)
    print('self-test: ' + ('FAILED' if bad else 'OK'))
    return 1 if bad else 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == '--self-test':
        return self_test(sys.argv[2])
    if len(sys.argv) != 3:
        print("usage: check_structure.py SRC_DIR CEILINGS.json | --self-test FIXTURES_DIR",
              file=sys.stderr)
        return 2
    src, ceilings_path = sys.argv[1], sys.argv[2]
    with open(ceilings_path) as fh:
        ceilings = json.load(fh)
    figures = measure(src)
    methods, mutexes, friends, idents = figures
    top = sorted(methods.items(), key=lambda kv: -kv[1])[:5]
    print('most methods: ' + ', '.join(f'{k} {v}' for k, v in top))
    print('mutexes over 2: ' + (', '.join(f'{k} {v}' for k, v in mutexes.items() if v > 2) or
                                'none'))
    print('friend/thread_local: ' + (', '.join(f'{k} {v}' for k, v in friends.items()) or
                                     'none'))
    print('lending identifiers: ' + (', '.join(f'{k} {v}' for k, v in idents.items()) or
                                     'none'))
    bad = judge(figures, ceilings)
    for b in bad:
        print('FAIL', b)
    print('structure: ' + ('FAILED' if bad else 'OK (within the ceilings of ' +
                                                  os.path.basename(ceilings_path) + ')'))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
