#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# run_example.sh SERVER CLIENT PORT [server args] -- [client args]
#
# Runs "SERVER 127.0.0.1 PORT [server args]", waits until it prints a line containing
# "listening", then runs "CLIENT 127.0.0.1 PORT [client args]". Passes only if both exit 0.
# Every wait is bounded; the processes started here are killed on the way out.
set -u

if [ $# -lt 3 ]; then
	echo "usage: $0 SERVER CLIENT PORT [server args] -- [client args]" >&2
	exit 2
fi
SERVER=$1
CLIENT=$2
PORT=$3
shift 3
ADDR=${RPMA_TEST_ADDR:-127.0.0.1} # the guest (tests/guest) sets its rxe address
SCALE=${RPMA_TEST_TIME_SCALE:-1}                # the emulated guest (tests/guest) runs slower
LIMIT=$((${RPMA_EXAMPLE_TIMEOUT:-60} * SCALE)) # seconds for each process
LISTEN_WAIT=$((20 * SCALE))                    # seconds for the server to start listening

server_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	server_args+=("$1")
	shift
done
[ $# -gt 0 ] && shift # the "--"
client_args=("$@")

out=$(mktemp "${TMPDIR:-/tmp}/rpma_example.XXXXXX")
spid=
cpid=
cleanup() {
	for p in $cpid $spid; do
		kill -KILL "$p" 2>/dev/null
	done
	rm -f "$out"
}
trap cleanup EXIT

timeout -k 5 "$LIMIT" "$SERVER" "$ADDR" "$PORT" "${server_args[@]}" >"$out" 2>&1 &
spid=$!

listening=0
for _ in $(seq $((LISTEN_WAIT * 10))); do
	if grep -q listening "$out"; then
		listening=1
		break
	fi
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.1
done
if [ $listening -ne 1 ]; then
	echo "run_example: the server did not start listening within ${LISTEN_WAIT} s" >&2
	cat "$out"
	exit 1
fi

echo "---- client: $(basename "$CLIENT") $ADDR $PORT ${client_args[*]}"
timeout -k 5 "$LIMIT" "$CLIENT" "$ADDR" "$PORT" "${client_args[@]}" &
cpid=$!
wait "$cpid"
crc=$?
cpid=

if [ $crc -ne 0 ]; then
	# a failed client may leave the server waiting for it: give it a moment, then stop it
	for _ in $(seq 30); do
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	kill -TERM "$spid" 2>/dev/null
fi
wait "$spid"
src=$?
spid=

echo "---- server: $(basename "$SERVER") $ADDR $PORT ${server_args[*]}"
cat "$out"
echo "---- server exit status $src, client exit status $crc"
[ $src -eq 0 ] && [ $crc -eq 0 ]
