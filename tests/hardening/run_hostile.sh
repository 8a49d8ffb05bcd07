#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# run_hostile.sh SERVER CLIENT PORT CASE [xfail_half_open] -- starts SERVER on 127.0.0.1:PORT, runs CLIENT's CASE
# against it (attack, then legitimate verified I/O and memory checks), then asks the server to
# quit. Passes only if the client passed, the server was still alive after the attack and it
# exited 0 (every memory check passed, teardown clean). Every wait is bounded.
set -u
if [ $# -lt 4 ]; then
	echo "usage: $0 SERVER CLIENT PORT CASE [xfail_half_open]" >&2
	exit 2
fi
SERVER=$1 CLIENT=$2 PORT=$3 CASE=$4
shift 4
ADDR=127.0.0.1
out=$(mktemp "${TMPDIR:-/tmp}/rpma_hostile.XXXXXX")
spid=
cleanup() {
	[ -n "$spid" ] && kill -KILL "$spid" 2>/dev/null
	rm -f "$out"
}
trap cleanup EXIT

# The port lies in the kernel's ephemeral range: a passing outgoing connection may hold it for a
# moment, so a failed start (bind) is retried a few times.
for attempt in $(seq 10); do
	timeout -k 5 150 "$SERVER" "$ADDR" "$PORT" >"$out" 2>&1 &
	spid=$!
	for _ in $(seq 200); do
		grep -qx READY "$out" && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	grep -qx READY "$out" && break
	wait "$spid" 2>/dev/null
	spid=
	echo "run_hostile: the server did not start (attempt $attempt):" >&2
	cat "$out" >&2
	sleep 0.5
done
if [ -z "$spid" ]; then
	echo "run_hostile: giving up" >&2
	exit 1
fi

timeout -k 5 120 "$CLIENT" "$ADDR" "$PORT" "$CASE" "$@"
crc=$?
alive=0
kill -0 "$spid" 2>/dev/null && alive=1
qrc=1
if [ $alive -eq 1 ]; then
	timeout -k 5 30 "$CLIENT" "$ADDR" "$PORT" quit
	qrc=$?
fi
if [ $qrc -ne 0 ]; then
	kill -TERM "$spid" 2>/dev/null
fi
wait "$spid"
src=$?
spid=
echo "---- server output (library messages included)"
# hostile peers make the library log a lot; the last lines tell the story
tail -n 40 "$out"
echo "run_hostile: client $crc, server alive after the attack: $alive, quit $qrc, server exit $src"
[ $crc -eq 0 ] && [ $alive -eq 1 ] && [ $qrc -eq 0 ] && [ $src -eq 0 ]
