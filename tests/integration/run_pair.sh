#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# run_pair.sh BIN PORT [args] -- runs "BIN server 127.0.0.1 PORT args", waits for its READY line,
# then runs "BIN client 127.0.0.1 PORT args"; passes only if both exit 0. Every wait is bounded.
# Optional per-role environments: RPMA_IT_SERVER_ENV and RPMA_IT_CLIENT_ENV, each a list of
# space-separated NAME=VALUE words that env(1) sets for that role only (e.g.
# RPMA_IT_SERVER_ENV="RPMA_PROVIDER=tcp"), over the environment the runner itself got.
# RPMA_IT_CLIENT_WRAP: words run before the client's command (a checker such as valgrind).
set -u

if [ $# -lt 2 ]; then
	echo "usage: $0 BIN PORT [args]" >&2
	exit 2
fi
BIN=$1
PORT=$2
shift 2
ADDR=${RPMA_TEST_ADDR:-127.0.0.1} # the guest (tests/guest) sets its rxe address
SCALE=${RPMA_TEST_TIME_SCALE:-1} # the emulated guest (tests/guest) runs slower
LIMIT=$((${RPMA_IT_TIMEOUT:-60} * SCALE)) # seconds for each process
READY_WAIT=$((20 * SCALE))              # seconds for the server to listen
# shellcheck disable=SC2206 # split into words on purpose
SERVER_ENV=(${RPMA_IT_SERVER_ENV:-})
# shellcheck disable=SC2206
CLIENT_ENV=(${RPMA_IT_CLIENT_ENV:-})
# shellcheck disable=SC2206
CLIENT_WRAP=(${RPMA_IT_CLIENT_WRAP:-})

out=$(mktemp "${TMPDIR:-/tmp}/rpma_it_server.XXXXXX")
spid=
cpid=

cleanup() {
	# only the processes this script started
	for p in $cpid $spid; do
		kill -KILL "$p" 2>/dev/null
	done
	rm -f "$out"
}
trap cleanup EXIT

# -k: a process that ignores TERM is killed anyway
timeout -k 5 "$LIMIT" env "${SERVER_ENV[@]}" "$BIN" server "$ADDR" "$PORT" "$@" >"$out" &
spid=$!

ready=0
for _ in $(seq $((READY_WAIT * 10))); do
	if grep -qx READY "$out"; then
		ready=1
		break
	fi
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.1
done
if [ $ready -ne 1 ]; then
	echo "run_pair: server did not print READY within ${READY_WAIT} s" >&2
	cat "$out"
	wait "$spid" 2>/dev/null
	echo "run_pair: server exit status $?" >&2
	exit 1
fi

timeout -k 5 "$LIMIT" env "${CLIENT_ENV[@]}" "${CLIENT_WRAP[@]}" "$BIN" client "$ADDR" "$PORT" "$@" &
cpid=$!
wait "$cpid"
crc=$?
cpid=

if [ $crc -ne 0 ]; then
	# a failed client may leave the server waiting: give it a moment, then stop it
	for _ in $(seq 50); do
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	kill -TERM "$spid" 2>/dev/null
fi
wait "$spid"
src=$?
spid=

cat "$out"
echo "run_pair: server exit status $src, client exit status $crc"
if [ $src -ne 0 ] || [ $crc -ne 0 ]; then
	exit 1
fi
exit 0
