#!/usr/bin/env bash
# fuzz.sh [--runs N] [--build-dir DIR] [TARGET...] -- builds the libFuzzer targets of tests/fuzz
# with clang (ASan+UBSan) and runs a campaign of N executions (default 10,000,000) per target,
# one process at a time. Targets: fuzz_frames fuzz_hello fuzz_descriptors (default: all).
# The growing corpus is kept in DIR/fuzz-corpus/<target> (reused by the next campaign), crash
# inputs go to DIR/fuzz-artifacts/<target>/, logs to DIR/fuzz-logs/<target>.log.
# Prints each target's executions, coverage and features; exits non-zero if one crashed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

runs=10000000
build="build-fuzz"
targets=()
while [[ $# -gt 0 ]]; do
    case $1 in
    --runs)
        runs=${2:?--runs needs a number}
        shift 2
        ;;
    --build-dir)
        build=${2:?--build-dir needs a directory}
        shift 2
        ;;
    -h | --help)
        sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    fuzz_frames | fuzz_hello | fuzz_descriptors)
        targets+=("$1")
        shift
        ;;
    *)
        echo "usage: $0 [--runs N] [--build-dir DIR] [fuzz_frames|fuzz_hello|fuzz_descriptors...]" >&2
        exit 2
        ;;
    esac
done
[[ $runs =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --runs wants a number, not '$runs'" >&2; exit 2; }
[[ ${#targets[@]} -gt 0 ]] || targets=(fuzz_frames fuzz_hello fuzz_descriptors)

# The build's dependencies, then clang's libFuzzer and sanitizer runtimes (optional there).
bash scripts/install-deps.sh
fuzzer_rt() { compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-$(uname -m).a" >/dev/null; }
if ! command -v clang++ >/dev/null || ! fuzzer_rt; then
    [[ $(id -u) -eq 0 ]] || { echo "fuzz.sh: clang and libclang-rt-14-dev are needed; run as root" >&2; exit 1; }
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends clang libclang-rt-14-dev
fi

cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DRPMA_BUILD_FUZZ=ON -DRPMA_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j2 --target "${targets[@]}"

src=tests/fuzz
summary=()
failed=0
for t in "${targets[@]}"; do
    corpus=$build/fuzz-corpus/$t artifacts=$build/fuzz-artifacts/$t log=$build/fuzz-logs/$t.log
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
    dirs=("$corpus" "$src/corpus/$t")
    compgen -G "$src/regressions/$t/*" >/dev/null && dirs+=("$src/regressions/$t")
    dict=()
    [[ -f $src/$t.dict ]] && dict=(-dict="$src/$t.dict")
    echo "=== $t: $runs executions (log: $log)"
    start=$SECONDS
    rc=0
    "$build/tests/fuzz/$t" -runs="$runs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "${dict[@]}" "${dirs[@]}" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    done_line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|INITED)' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
    corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$done_line")
    line="$t: executions ${execs:-?}, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, $((SECONDS - start)) s"
    if [[ $rc -ne 0 ]]; then
        failed=1
        line+=" -- FAILED (exit $rc): see $log and $artifacts/"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | head -5 || true
    fi
    echo "$line"
    summary+=("$line")
done

echo "=== summary"
printf '%s\n' "${summary[@]}"
exit $failed
