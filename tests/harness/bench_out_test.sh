#!/usr/bin/env bash
# bench_out_test.sh SOURCE_DIR -- bench/run.sh and bench/fio/run.sh write their results under
# their build folder unless --out names a file, so a run never replaces the tracked
# bench/results.json or bench/fio/results.json. Copies of both scripts run in a scratch tree
# with stubs of cmake, fio's build.sh and the two run.py (nothing is built or measured).
set -euo pipefail
src=${1:?usage: bench_out_test.sh SOURCE_DIR}
tmp=$(mktemp -d /tmp/rpma-bench-out.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
die() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$tmp/bench/fio" "$tmp/rpma" "$tmp/bin"
cp "$src/bench/run.sh" "$tmp/bench/"
cp "$src/bench/fio/run.sh" "$tmp/bench/fio/"
touch "$tmp/rpma/librpma.so"
printf '#!/bin/sh\ntouch "%s/fio"\necho "%s/fio"\n' "$tmp" "$tmp" >"$tmp/bench/fio/build.sh"
# configuring makes the -B folder, nothing else
# shellcheck disable=SC2016 # the stub expands its own arguments
printf '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -B ] && mkdir -p "$2"; shift; done\nexit 0\n' \
    >"$tmp/bin/cmake"
chmod +x "$tmp/bin/cmake"
for py in bench/run.py bench/fio/run.py; do
    cat >"$tmp/$py" <<'PY'
import sys
out = sys.argv[sys.argv.index("--out") + 1]
with open(out, "w") as f:
    f.write("new\n")
print("stub run.py wrote", out)
PY
done

# check SCRIPT TRACKED DEFAULT_OUT [args...]: a run without --out leaves TRACKED and writes
# DEFAULT_OUT; one with --out TRACKED writes it.
check() {
    local script=$1 tracked=$2 default=$3
    shift 3
    echo tracked >"$tracked"
    env -u RPMA_BENCH_BUILD PATH="$tmp/bin:$PATH" bash "$script" "$@"
    [[ $(cat "$tracked") == tracked ]] || die "$script replaced $tracked by default"
    [[ -f $default ]] || die "$script wrote nothing to $default"
    env -u RPMA_BENCH_BUILD PATH="$tmp/bin:$PATH" bash "$script" "$@" --out "$tracked"
    [[ $(cat "$tracked") == new ]] || die "$script --out did not write $tracked"
}
check "$tmp/bench/run.sh" "$tmp/bench/results.json" "$tmp/build-bench/results.json"
check "$tmp/bench/fio/run.sh" "$tmp/bench/fio/results.json" "$tmp/fio-build/results.json" \
    --rpma "$tmp/rpma" --fio-dir "$tmp/fio-build" --no-perf
echo "bench results stay untracked by default: OK"
