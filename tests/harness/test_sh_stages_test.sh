#!/usr/bin/env bash
# test_sh_stages_test.sh SOURCE_DIR -- scripts/test.sh runs every stage even when one fails,
# prints each stage's verdict at the end and exits non-zero if any failed. It runs a copy of the
# script in a scratch tree where install-deps.sh, cmake and ctest are stubs (nothing is built or
# installed); FAIL_BUILD / FAIL_TEST name the build folder whose build or tests fail.
set -euo pipefail
src=${1:?usage: test_sh_stages_test.sh SOURCE_DIR}
tmp=$(mktemp -d /tmp/rpma-test-sh.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
die() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$tmp/tree/scripts" "$tmp/tree/tests/fuzz" "$tmp/bin"
cp "$src/scripts/test.sh" "$tmp/tree/scripts/"
echo 'exit 0' >"$tmp/tree/scripts/install-deps.sh"
touch "$tmp/tree/tests/fuzz/CMakeLists.txt"
cat >"$tmp/bin/cmake" <<'SH'
#!/bin/sh
# "cmake --build DIR ..." fails for DIR = $FAIL_BUILD; configuring makes the -B folder
[ "$1" = --build ] && [ "$2" = "${FAIL_BUILD:-}" ] && { echo "stub: build of $2 fails"; exit 2; }
while [ $# -gt 0 ]; do [ "$1" = -B ] && mkdir -p "$2"; shift; done
exit 0
SH
cat >"$tmp/bin/ctest" <<'SH'
#!/bin/sh
dir=$(basename "$PWD")
echo "ctest in $dir: $*" >>"$CALLS"
[ "$dir" = "${FAIL_TEST:-}" ] && { echo "stub: tests in $dir fail"; exit 8; }
exit 0
SH
chmod +x "$tmp/bin/cmake" "$tmp/bin/ctest"

# run EXPECTED_RC [test.sh option]: runs the copy, keeps its output in $out and the ctest calls
run() {
    local want=$1 rc=0
    shift
    : >"$tmp/calls"
    env -u RPMA_BUILD_DIR CALLS="$tmp/calls" PATH="$tmp/bin:$PATH" bash "$tmp/tree/scripts/test.sh" "$@" >"$tmp/out" 2>&1 || rc=$?
    out=$(cat "$tmp/out")
    [[ $rc -eq $want ]] || { echo "$out"; die "test.sh $* exited $rc, not $want"; }
}
has() { grep -qE "$1" <<<"$out" || { echo "$out"; die "no line matching '$1'"; }; }
calls() { [[ $(grep -c "ctest in $1:" "$tmp/calls") -eq $2 ]] || { cat "$tmp/calls"; die "ctest ran in $1 not $2 times"; }; }

echo "== every stage passes"
run 0
has '^  plain  passed' && has '^  guest  passed' && has '^  asan   passed' && has '^  fuzz   passed'
has '^=== all stages passed$'
calls build 2 && calls build-asan 2 && calls build-fuzz 1

echo "== the plain tests fail: the guest, asan and fuzz stages still run"
FAIL_TEST=build run 1
has '^  plain  FAILED' && has '^  guest  FAILED' && has '^  asan   passed' && has '^  fuzz   passed'
has '^=== some stages failed$'
calls build 2 && calls build-asan 2 && calls build-fuzz 1

echo "== the plain build fails: the guest stage skips, saying why; asan and fuzz run"
FAIL_BUILD=build run 1
has '^  plain  FAILED' && has '^  guest  skipped  the build in build failed' && has '^  asan   passed'
has '^  fuzz   passed'
calls build 0 && calls build-asan 2 && calls build-fuzz 1

echo "== asan fails under --all: tsan and fuzz still run"
FAIL_TEST=build-asan run 1 --all
has '^  asan   FAILED' && has '^  tsan   passed' && has '^  fuzz   passed'
calls build-tsan 1 && calls build-fuzz 1

echo "== a build with the fio tests: fio_build runs first, on its own (outside the namespace)"
mkdir -p "$tmp/tree/build-asan/tests/fio"
echo 'add_test(fio_build ...)' >"$tmp/tree/build-asan/tests/fio/CTestTestfile.cmake"
run 0 --asan
has '^=== asan: fio.s build, outside the network namespace'
calls build-asan 3
[[ $(grep -m1 "ctest in build-asan:" "$tmp/calls") == *"-R ^fio_build\$"* ]] ||
    { cat "$tmp/calls"; die "fio_build did not run first"; }
rm -r "$tmp/tree/build-asan/tests"

echo "== --quick runs the plain stage only; a bad option is refused"
run 0 --quick
has '^  plain  passed'
calls build 1 && calls build-asan 0 && calls build-fuzz 0
run 2 --nonsense
echo "test.sh stages: OK"
