#!/usr/bin/env bash
# skip_reasons_test.sh SOURCE_DIR -- a plain `ctest` run (no -V) of a small project that uses
# cmake/skip_reasons.cmake must print why each skipped test skipped, also when the reason ends a
# long output, must not list a passed or a failed test, and must keep ctest's exit status.
set -euo pipefail
src=${1:?usage: skip_reasons_test.sh SOURCE_DIR}
tmp=$(mktemp -d /tmp/rpma-skip-reasons.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
die() { echo "FAIL: $*" >&2; exit 1; }

mkdir "$tmp/src"
cat >"$tmp/src/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.22)
project(skip_reasons NONE)
enable_testing()
include($src/cmake/skip_reasons.cmake)
add_test(NAME skips COMMAND sh -c "echo working; echo 'SKIP: no widget here'; exit 77")
add_test(NAME skips_late COMMAND sh -c "seq 1 2000; echo 'SKIP: said after a long output'; exit 77")
add_test(NAME passes COMMAND sh -c "echo fine")
add_test(NAME fails COMMAND sh -c "echo 'SKIP: not a skip, it exits 1'; exit 1")
set_tests_properties(skips skips_late fails PROPERTIES SKIP_RETURN_CODE 77)
CM
cmake -S "$tmp/src" -B "$tmp/build" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; die "configure"; }

cd "$tmp/build"
rc=0
ctest -E fails >"$tmp/out" 2>&1 || rc=$?
cat "$tmp/out"
[[ $rc -eq 0 ]] || die "ctest exited $rc with only passed and skipped tests"
grep -qx $'\tskips: no widget here' "$tmp/out" || die "the reason of 'skips' is not printed"
grep -qx $'\tskips_late: said after a long output' "$tmp/out" ||
    die "the reason at the end of a long output is not printed"
grep -q 'passes:' "$tmp/out" && die "a passed test is listed as skipped"

rc=0
ctest >"$tmp/out" 2>&1 || rc=$?
cat "$tmp/out"
[[ $rc -eq 8 ]] || die "ctest exited $rc with a failed test, not 8"
grep -q $'\tfails:' "$tmp/out" && die "a failed test is listed as skipped"
grep -qx $'\tskips: no widget here' "$tmp/out" || die "the reason of 'skips' is not printed beside a failure"
echo "skip reasons: OK"
