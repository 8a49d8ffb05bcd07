#!/usr/bin/env bash
# run_sh_out_test.sh SOURCE_DIR -- bench/fio/run.sh writes its results under the fio build folder
# unless --out names a file, so a run never replaces the tracked bench/fio/results.json. A copy
# of run.sh runs in a scratch tree with stubs of build.sh and run.py (nothing is built or run).
set -euo pipefail
src=${1:?usage: run_sh_out_test.sh SOURCE_DIR}
tmp=$(mktemp -d /tmp/rpma-fio-out.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
die() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$tmp/bench/fio" "$tmp/rpma"
cp "$src/bench/fio/run.sh" "$tmp/bench/fio/"
echo tracked >"$tmp/bench/fio/results.json"
touch "$tmp/rpma/librpma.so"
printf '#!/bin/sh\ntouch "%s/fio"\necho "%s/fio"\n' "$tmp" "$tmp" >"$tmp/bench/fio/build.sh"
cat >"$tmp/bench/fio/run.py" <<'PY'
import sys
out = sys.argv[sys.argv.index("--out") + 1]
with open(out, "w") as f:
    f.write("new\n")
print("stub run.py wrote", out)
PY

bash "$tmp/bench/fio/run.sh" --rpma "$tmp/rpma" --fio-dir "$tmp/fio-build" --no-perf
[[ $(cat "$tmp/bench/fio/results.json") == tracked ]] || die "the default run replaced the tracked file"
[[ -f $tmp/fio-build/results.json ]] || die "the default run wrote nothing under --fio-dir"

bash "$tmp/bench/fio/run.sh" --rpma "$tmp/rpma" --fio-dir "$tmp/fio-build" --no-perf \
    --out "$tmp/bench/fio/results.json"
[[ $(cat "$tmp/bench/fio/results.json") == new ]] || die "--out did not write the named file"
echo "run.sh output: OK"
