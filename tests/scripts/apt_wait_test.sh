#!/usr/bin/env bash
# apt_wait_test.sh APT_GET_WAIT -- scripts/apt-get-wait waits for a held apt lock, then succeeds.
# `apt-get update` runs on a private, empty state (its own lists, cache and an empty sources
# list), so the machine's package state is neither read for writing nor changed. The lock is
# held by a helper that lets go only once apt-get-wait has said it is waiting: no timing.
set -u
wrapper=$1
command -v apt-get >/dev/null || { echo "no apt-get: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/apt_wait_test.XXXXXX")
holder=
cleanup() {
    [[ -n $holder ]] && kill "$holder" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/parts"
: >"$dir/sources.list"
opts=(-q -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
    -o "Dir::Etc::SourceList=$dir/sources.list" -o "Dir::Etc::SourceParts=$dir/parts")

# apt's lock is an fcntl lock: hold it until the file "release" appears
python3 - "$dir" <<'PY' &
import fcntl, os, sys, time
d = sys.argv[1]
f = open(os.path.join(d, "lists", "lock"), "w")
fcntl.lockf(f, fcntl.LOCK_EX)
open(os.path.join(d, "held"), "w").close()
while not os.path.exists(os.path.join(d, "release")):
    time.sleep(0.05)
PY
holder=$!
for _ in $(seq 600); do [[ -e $dir/held ]] && break; sleep 0.05; done
[[ -e $dir/held ]] || { echo "FAIL: the lock holder did not start"; exit 1; }

# plain apt-get fails at once: the case the wrapper exists for
if LC_ALL=C apt-get "${opts[@]}" update >"$dir/plain.out" 2>&1; then
    echo "FAIL: apt-get update succeeded with its lock held"; exit 1
fi
grep -q 'Could not get lock' "$dir/plain.out" || { echo "FAIL: no lock error:"; cat "$dir/plain.out"; exit 1; }

RPMA_APT_LOCK_WAIT=120 "$wrapper" "${opts[@]}" update >"$dir/out" 2>"$dir/err" &
pid=$!
for _ in $(seq 1200); do
    grep -q 'waiting' "$dir/err" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
grep -q 'waiting' "$dir/err" || { echo "FAIL: apt-get-wait did not wait:"; cat "$dir/err"; exit 1; }
touch "$dir/release"
wait "$holder"; holder=
wait "$pid"; rc=$?
cat "$dir/err"
[[ $rc -eq 0 ]] || { echo "FAIL: apt-get-wait exited $rc after the lock was released"; exit 1; }
echo "ok: apt-get-wait waited for the lock, then ran apt-get update"
