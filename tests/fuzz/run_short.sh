#!/usr/bin/env bash
# run_short.sh FUZZER SRC_DIR WORK_DIR SECONDS -- the fuzz_<target>_short ctest: executes every
# seed (SRC_DIR/corpus/<target>) and every saved regression input (SRC_DIR/regressions/<target>),
# failing if one crashes, then fuzzes from them for SECONDS. New inputs and crash artifacts go to
# WORK_DIR, which is emptied first.
set -euo pipefail
fuzzer=$1 src=$2 work=$3 seconds=$4
target=$(basename "$fuzzer")

rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
dirs=("$work/corpus" "$src/corpus/$target")
if [[ -d $src/regressions/$target ]] && compgen -G "$src/regressions/$target/*" >/dev/null; then
    dirs+=("$src/regressions/$target")
fi
dict=()
[[ -f $src/$target.dict ]] && dict=(-dict="$src/$target.dict")

# -timeout: no single input may take 10 s (a hang); -rss_limit_mb: nor grow without bound.
exec "$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "${dict[@]}" "${dirs[@]}"
