#!/usr/bin/env bash
# skip_reasons.sh BUILD_DIR -- run by ctest after its tests (CTEST_CUSTOM_POST_TEST, written by
# cmake/skip_reasons.cmake): prints why each skipped test skipped, which ctest itself shows only
# with -V. A test says why on a line of its output that starts with "SKIP: " before it exits 77
# (SKIP_RETURN_CODE); ctest logs such a test as passed, so that line is what marks it here.
# Always exits 0: a failure here must not change ctest's verdict.
log=${1:?usage: skip_reasons.sh BUILD_DIR}/Testing/Temporary/LastTest.log
# while ctest runs its post-test commands the log is still LastTest.log.tmp
[[ -f $log.tmp ]] && log=$log.tmp
[[ -f $log ]] || exit 0
awk '
/^[0-9]+\/[0-9]+ Test: / { name = $0; sub(/^[0-9]+\/[0-9]+ Test: /, "", name); why = ""; last = ""; out = 0; next }
/^Output:$/ { out = 1; getline; next }
/^<end of output>$/ { out = 0; next }
out && /^SKIP: / && why == "" { why = substr($0, 7) }
out && NF { last = $0 }
!out && /^Test Passed\.$/ && why != "" { r[++n] = name ": " why }
!out && /^Skip regular expression found/ { r[++n] = name ": " (why != "" ? why : last) }
END {
    if (n == 0) exit
    print "Why the skipped tests skipped:"
    for (i = 1; i <= n; i++) print "\t" r[i]
}' "$log"
exit 0
