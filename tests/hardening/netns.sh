#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# netns.sh NETFAULT MODE PORT -- network faults between two network namespaces this script
# creates (a veth pair, 10.231.N.1 and 10.231.N.2 inside them only) and always deletes.
#   cut          a connection, then everything dropped both ways inside the server's namespace
#                (iptables INPUT and OUTPUT; a one-way cut would let the server's FIN out when
#                its own timeout fires, and the client could see CLOSED before its timeout, a
#                race of two equal timers): both ends must get LOST within
#                RPMA_DEAD_PEER_TIMEOUT_MS=2000 + slack
#   unreachable  a closed port (REJECTED quickly); then a DROPping peer and an address nobody
#                owns (UNREACHABLE within the conn cfg timeout + slack)
# Exits 77 (ctest SKIP_RETURN_CODE) when not root, or namespaces or iptables are not permitted.
set -u
if [ $# -ne 3 ]; then
	echo "usage: $0 NETFAULT cut|unreachable PORT" >&2
	exit 2
fi
BIN=$1 MODE=$2 PORT=$3
SKIP=77
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: network namespaces need root"
	exit $SKIP
fi
for tool in ip iptables; do
	if ! command -v $tool >/dev/null; then
		echo "SKIP: $tool is not installed (scripts/install-deps.sh installs it)"
		exit $SKIP
	fi
done

NS_A=rpma_hard_${PORT}_$$_a # the server's side
NS_B=rpma_hard_${PORT}_$$_b # the client's side
NET=10.231.$((PORT % 200))
A=$NET.1
B=$NET.2
NOBODY=$NET.3
tfile=$(mktemp "${TMPDIR:-/tmp}/rpma_netcut.XXXXXX")
rm -f "$tfile"
out=$(mktemp "${TMPDIR:-/tmp}/rpma_netns.XXXXXX")
spid=

cleanup() {
	[ -n "$spid" ] && kill -KILL "$spid" 2>/dev/null
	ip netns del "$NS_A" 2>/dev/null
	ip netns del "$NS_B" 2>/dev/null
	rm -f "$tfile" "$tfile.tmp" "$out"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if ! ip netns add "$NS_A" 2>/dev/null; then
	echo "SKIP: ip netns add is not permitted here"
	exit $SKIP
fi
set -e
ip netns add "$NS_B"
ip link add rh${PORT}a netns "$NS_A" type veth peer name rh${PORT}b netns "$NS_B"
ip -n "$NS_A" addr add "$A/24" dev rh${PORT}a
ip -n "$NS_B" addr add "$B/24" dev rh${PORT}b
for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
ip -n "$NS_A" link set rh${PORT}a up
ip -n "$NS_B" link set rh${PORT}b up
set +e
if ! ip netns exec "$NS_A" iptables -S >/dev/null 2>&1; then
	echo "SKIP: iptables does not work inside a network namespace here"
	exit $SKIP
fi
CUT="ip netns exec $NS_A iptables -A INPUT -j DROP && ip netns exec $NS_A iptables -A OUTPUT -j DROP"
export RPMA_DEAD_PEER_TIMEOUT_MS=2000

in_a() { ip netns exec "$NS_A" timeout -k 5 60 "$@"; }
in_b() { ip netns exec "$NS_B" timeout -k 5 60 "$@"; }

case $MODE in
cut)
	in_a "$BIN" server "$A" "$PORT" "$tfile" >"$out" 2>&1 &
	spid=$!
	for _ in $(seq 100); do
		grep -qx READY "$out" && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -qx READY "$out"; then
		echo "netns: the server did not start" >&2
		cat "$out"
		exit 1
	fi
	in_b "$BIN" client "$A" "$PORT" "$tfile" "$CUT"
	crc=$?
	wait "$spid"
	src=$?
	spid=
	cat "$out"
	echo "netns cut: client $crc, server $src"
	[ $crc -eq 0 ] && [ $src -eq 0 ]
	;;
unreachable)
	in_b "$BIN" rejected "$A" "$PORT" || exit 1
	eval "$CUT" || exit 1
	in_b "$BIN" unreachable "$A" "$PORT" 1500 || exit 1
	in_b "$BIN" unreachable "$NOBODY" "$PORT" 1500 || exit 1
	;;
*)
	echo "netns: unknown mode $MODE" >&2
	exit 2
	;;
esac
