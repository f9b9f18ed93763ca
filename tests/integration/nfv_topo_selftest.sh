#!/bin/bash
# Invariant: nfv_topo.sh builds a wire that carries a guest's frames and
# follows a moved guest. Frames from the generator cross gen -> switch ->
# source host's bridge -> tap and, written back into the tap fd by a
# stand-in for the guest (bench/tapecho: MACs swapped), come back to the
# generator, all of them, once each, intact; the same through the second
# NIC's tap; the migration link carries TCP between the hosts' addresses and
# has its tbf; after the stand-in moves to the destination's tap and sends a
# RARP, the switch has learned the new port before any other frame, and the
# frames come back from there. Teardown leaves no namespace behind. Only
# counts decide (a non-migrating path loses nothing), never timing. Skips
# (77) where the namespaces, bridges or taps cannot be made.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nfv_topo.sh"
GWPKTGEN=${GWPKTGEN:-$(dirname "$GODWIT_BIN")/../bench/gwpktgen}
TAPECHO=${TAPECHO:-$(dirname "$GODWIT_BIN")/../bench/tapecho}
nfv_available || skip "cannot build the NFV topology (needs root, ip, /dev/net/tun)"
{ [ -x "$GWPKTGEN" ] && [ -x "$TAPECHO" ]; } || fail "gwpktgen/tapecho not built ($GWPKTGEN, $TAPECHO)"
name="st$$"
trap 'cleanup; nfv_teardown "$name"' EXIT
nfv_setup "$name" --link 10gbit --nics 2 || fail "nfv_setup"

# echo_start NS TAP MAC LABEL [--rarp]: the stand-in on a tap; sets ECHO_PID.
echo_start() {
	local ns=$1 tap=$2 mac=$3 label=$4; shift 4
	ip netns exec "$ns" "$TAPECHO" --tap "$tap" --mac "$mac" --seconds 120 "$@" \
		>"$T/$label.out" 2>"$T/$label.log" &
	ECHO_PID=$!
	PIDS+=("$ECHO_PID")
	for _ in $(seq 100); do	# at most 10 s
		grep -q '^tapecho ready' "$T/$label.out" 2>/dev/null && return 0
		kill -0 "$ECHO_PID" 2>/dev/null || fail "tapecho $label exited: $(cat "$T/$label.log")"
		sleep 0.1
	done
	fail "tapecho $label not ready"
}
echo_stop() { kill -TERM "$1" 2>/dev/null; wait "$1" 2>/dev/null; }

# gen_check MAC LABEL: 1000 pps for 1 s to MAC; every frame back, once, intact.
gen_check() {
	local mac=$1 label=$2
	ip netns exec "$NFV_GEN" "$GWPKTGEN" --iface "$NFV_GEN_IF" --dst-mac "$mac" --pps 1000 --seconds 1 \
		--json >"$T/$label.json" 2>"$T/$label.log" || fail "gwpktgen $label: $(cat "$T/$label.log")"
	[ "$(jget "$T/$label.json" "d['sent']")" = 1000 ] || fail "$label: sent $(jget "$T/$label.json" "d['sent']")"
	for k in lost duplicated corrupted; do
		[ "$(jget "$T/$label.json" "d['$k']")" = 0 ] || fail "$label: $k = $(jget "$T/$label.json" "d['$k']") ($(cat "$T/$label.json"))"
	done
	[ "$(jget "$T/$label.json" "d['received']")" = 1000 ] || fail "$label: received $(jget "$T/$label.json" "d['received']")"
}

# The migration link: its own addresses, tbf on both ends, TCP across.
for ns in "$NFV_SRC" "$NFV_DST"; do
	ip netns exec "$ns" tc qdisc show dev "$NFV_MIG_IF" | grep -q '^qdisc tbf' || fail "no tbf on $ns $NFV_MIG_IF"
done
ip netns exec "$NFV_DST" python3 -c '
import socket, sys
s = socket.socket(); s.settimeout(10); s.bind((sys.argv[1], 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); c.settimeout(10); c.sendall(c.recv(64).upper())' "$NFV_DST_ADDR" >"$T/tcp.out" 2>"$T/tcp.log" &
srv=$!
PIDS+=("$srv")
for _ in $(seq 100); do [ -s "$T/tcp.out" ] && break; sleep 0.1; done
port=$(head -n1 "$T/tcp.out")
[ -n "$port" ] || fail "no TCP listener on the destination's migration address"
reply=$(ip netns exec "$NFV_SRC" python3 -c '
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10); c.sendall(b"godwit")
print(c.recv(64).decode())' "$NFV_DST_ADDR" "$port") || fail "TCP over the migration link"
[ "$reply" = GODWIT ] || fail "TCP over the migration link: '$reply'"
wait "$srv" 2>/dev/null

# The "VM" on the source host: gen -> sw -> src bridge -> gwtap0 and back.
echo_start "$NFV_SRC" "$NFV_TAP0" "$NFV_VM_MAC0" echo-src0
src0=$ECHO_PID
gen_check "$NFV_VM_MAC0" src0
[ "$(nfv_fdb_port "$name" "$NFV_VM_MAC0")" = "$NFV_SW_PORT_SRC" ] ||
	fail "switch has $NFV_VM_MAC0 on '$(nfv_fdb_port "$name" "$NFV_VM_MAC0")', not $NFV_SW_PORT_SRC"
# The second NIC's tap carries its own MAC's frames the same way.
echo_start "$NFV_SRC" "$NFV_TAP1" "$NFV_VM_MAC1" echo-src1
src1=$ECHO_PID
gen_check "$NFV_VM_MAC1" src1
echo_stop "$src1"

# Move the "VM": stop it on the source, start it on the destination's tap
# with a RARP. The switch must learn the new port from the RARP alone.
echo_stop "$src0"
grep -q '^tapecho echoed 1000$' "$T/echo-src0.log" || fail "source stand-in: $(cat "$T/echo-src0.log")"
echo_start "$NFV_DST" "$NFV_TAP0" "$NFV_VM_MAC0" echo-dst0 --rarp
dst0=$ECHO_PID
learned=""
for _ in $(seq 50); do	# at most 5 s
	learned=$(nfv_fdb_port "$name" "$NFV_VM_MAC0")
	[ "$learned" = "$NFV_SW_PORT_DST" ] && break
	sleep 0.1
done
[ "$learned" = "$NFV_SW_PORT_DST" ] || fail "after the RARP the switch has $NFV_VM_MAC0 on '$learned', not $NFV_SW_PORT_DST"
gen_check "$NFV_VM_MAC0" dst0
echo_stop "$dst0"
grep -q '^tapecho echoed 1000$' "$T/echo-dst0.log" || fail "destination stand-in: $(cat "$T/echo-dst0.log")"

# Teardown: nothing of ours is left, and a second teardown is harmless.
nfv_teardown "$name"
nfv_teardown "$name"
left=$(ip netns list 2>/dev/null | grep -c "^gw-$name-")
[ "$left" = 0 ] || fail "$left namespaces left after teardown"
pass "gen->sw->src tap->gen and back: 1000/1000 on two NICs; moved to dst, learned from the RARP, 1000/1000"
