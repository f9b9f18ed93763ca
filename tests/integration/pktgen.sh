#!/bin/bash
# Invariant: bench/gwpktgen counts what comes back right. Over a veth pair
# between two namespaces, with the guest stand-in (bench/tapecho) echoing
# frames with MACs swapped:
#   count  2000 pps for 2 s on a path that does not move: every frame sent
#          comes back once and intact (lost = duplicated = corrupted = 0,
#          received = sent = 4000). Only counts decide.
#   pause  the stand-in is stopped (SIGSTOP) for at least 200 ms while
#          1000 pps flow, with a receive buffer too small to hold what
#          arrives meanwhile: frames are lost and the longest gap reported
#          is at least the pause minus 3 frame intervals (a lower bound: a
#          slower machine only makes the real gap longer), and the mark
#          file yields forwarded rates before and after it.
# Skips (77) where namespaces cannot be made. Usage: pktgen.sh count|pause
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"
case=${1:?usage: pktgen.sh count|pause}
GWPKTGEN=${GWPKTGEN:-$(dirname "$GODWIT_BIN")/../bench/gwpktgen}
TAPECHO=${TAPECHO:-$(dirname "$GODWIT_BIN")/../bench/tapecho}
netns_available || skip "cannot create network namespaces (needs root / CAP_NET_ADMIN)"
{ [ -x "$GWPKTGEN" ] && [ -x "$TAPECHO" ]; } || fail "gwpktgen/tapecho not built ($GWPKTGEN, $TAPECHO)"
name="pg$$"
trap 'cleanup; netns_teardown "$name"' EXIT
netns_setup "$name" none || fail "netns_setup"
for ns in "$NETNS_SRC" "$NETNS_DST"; do
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1 || true
done
mac=$(ip -n "$NETNS_DST" -br link show veth0 | awk '{print $3}')
[ -n "$mac" ] || fail "no MAC on the echo side"

echo_args=()
[ "$case" = pause ] && echo_args=(--rcvbuf 16384)	# a few dozen frames, a fraction of the pause's 200
ip netns exec "$NETNS_DST" "$TAPECHO" --iface veth0 --mac "$mac" --seconds 60 "${echo_args[@]}" \
	>"$T/echo.out" 2>"$T/echo.log" &
echo_pid=$!
PIDS+=("$echo_pid")
for _ in $(seq 100); do
	grep -q '^tapecho ready' "$T/echo.out" 2>/dev/null && break
	kill -0 "$echo_pid" 2>/dev/null || fail "tapecho exited: $(cat "$T/echo.log")"
	sleep 0.1
done
grep -q '^tapecho ready' "$T/echo.out" || fail "tapecho not ready"

case $case in
count)
	ip netns exec "$NETNS_SRC" "$GWPKTGEN" --iface veth0 --dst-mac "$mac" --pps 2000 --seconds 2 --json \
		>"$T/gen.json" 2>"$T/gen.log" || fail "gwpktgen: $(cat "$T/gen.log")"
	for k in lost duplicated corrupted; do
		[ "$(jget "$T/gen.json" "d['$k']")" = 0 ] || fail "$k = $(jget "$T/gen.json" "d['$k']"): $(cat "$T/gen.json")"
	done
	[ "$(jget "$T/gen.json" "d['sent']")" = 4000 ] || fail "sent: $(cat "$T/gen.json")"
	[ "$(jget "$T/gen.json" "d['received']")" = 4000 ] || fail "received: $(cat "$T/gen.json")"
	pass "4000/4000 back, none lost, duplicated or corrupted ($(jget "$T/gen.json" "'gap %.3f ms, achieved %.0f pps, rtt p50 %.0f us' % (d['net-gap-ms'], d['achieved-pps'], d['rtt-p50-us'])"))"
	;;
pause)
	pps=1000 pause_s=0.2
	ip netns exec "$NETNS_SRC" "$GWPKTGEN" --iface veth0 --dst-mac "$mac" --pps "$pps" --seconds 4 \
		--start-file "$T/start" --mark-file "$T/mark" --json >"$T/gen.json" 2>"$T/gen.log" &
	gen_pid=$!
	PIDS+=("$gen_pid")
	for _ in $(seq 100); do [ -s "$T/start" ] && break; sleep 0.1; done	# at most 10 s
	[ -s "$T/start" ] || fail "gwpktgen did not start: $(cat "$T/gen.log")"
	sleep 1.3	# a whole second of rate before the mark, two after
	kill -STOP "$echo_pid"
	: >"$T/mark"	# the pause, as a migration's would be marked
	sleep "$pause_s"
	kill -CONT "$echo_pid"
	wait "$gen_pid" || fail "gwpktgen: $(cat "$T/gen.log")"
	gap=$(jget "$T/gen.json" "d['net-gap-ms']")
	lost=$(jget "$T/gen.json" "d['lost']")
	for k in duplicated corrupted; do
		[ "$(jget "$T/gen.json" "d['$k']")" = 0 ] || fail "$k = $(jget "$T/gen.json" "d['$k']"): $(cat "$T/gen.json")"
	done
	# pause minus 3 frame intervals, in ms
	bound=$(python3 -c "print(${pause_s} * 1000 - 3 * 1000 / $pps)")
	python3 -c "import sys; sys.exit(0 if $gap >= $bound else 1)" || fail "gap $gap ms < $bound ms: $(cat "$T/gen.json")"
	[ "$lost" -gt 0 ] || fail "no frame lost during the pause: $(cat "$T/gen.json")"
	[ "$(jget "$T/gen.json" "d['mark-ns'] > 0")" = True ] || fail "mark not seen: $(cat "$T/gen.json")"
	[ "$(jget "$T/gen.json" "d['forwarded-pps-before'] is not None and d['forwarded-pps-after'] is not None")" = True ] ||
		fail "no rates before/after the mark: $(cat "$T/gen.json")"
	pass "pause ${pause_s} s: gap $gap ms >= $bound ms, lost $lost ($(jget "$T/gen.json" "'before %s after %s pps' % (d['forwarded-pps-before'], d['forwarded-pps-after'])"))"
	;;
*) fail "unknown case $case" ;;
esac
