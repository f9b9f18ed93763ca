#!/bin/bash
# Invariant: `godwit run --nic` wires a virtio-net NIC into the VM on a tap
# of its host, and it migrates between the hosts of nfv_topo.sh. migrate:
# the source in gw-NAME-src and the destination in gw-NAME-dst each open
# their own gwtap0 (--nic tap=gwtap0,mac=...), the migration over the
# hosts' link completes and is verified, the destination runs the VM with
# its NIC loaded (no NIC refused, its tap attached). refuse: a destination
# without --nic refuses the source's state with a reason naming the NICs,
# and the source runs on, NIC and all. A bad --nic is a usage error (2).
# The guest runs idle here: nfv_fwd.sh sends frames through a guest that
# drives its NIC (l2fwd). Skips (77) without root, namespaces or /dev/net/tun.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nfv_topo.sh"
case=${1:?case}
"$GODWIT" run --nic tap=gwtap0,mac=01:00:00:00:00:01 >/dev/null 2>"$T/usage.err"
rc=$?
[ "$rc" = 2 ] || fail "a multicast MAC: exit $rc, not 2 ($(cat "$T/usage.err"))"
nfv_available || skip "cannot build the NFV topology (needs root, ip, /dev/net/tun)"
name="nic$$"
trap 'cleanup; nfv_teardown "$name"' EXIT
nfv_setup "$name" --link none --nics 1 || fail "nfv_setup"
nic=(--nic "tap=$NFV_TAP0,mac=$NFV_VM_MAC0")
vm=(--accel "$IT_ACCEL" --vcpus 1)
if [ "$case" = migrate ]; then
	DST_WRAP="ip netns exec $NFV_DST" start_dst "tcp:$NFV_DST_ADDR:0" "${vm[@]}" "${nic[@]}" --exit-after-migrate
else
	DST_WRAP="ip netns exec $NFV_DST" start_dst "tcp:$NFV_DST_ADDR:0" "${vm[@]}" --exit-after-migrate
fi
SRC_WRAP="ip netns exec $NFV_SRC" start_src "${vm[@]}" --memory 128M --fill mix "${nic[@]}"
grep -q "nic dev=virtio-net0 tap=$NFV_TAP0" "$T/src.log" || fail "the source did not attach its NIC"
"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --json >"$T/mig.json" 2>"$T/mig.err"
mrc=$?
case $case in
migrate)
	[ "$mrc" = 0 ] || fail "migrate exit $mrc: $(cat "$T/mig.json" "$T/mig.err")"
	[ "$(jget "$T/mig.json" "d['status']")" = completed ] || fail "status $(cat "$T/mig.json")"
	[ "$(jget "$T/mig.json" "d['verified']")" = True ] || fail "not verified"
	grep -q "nic dev=virtio-net0 tap=$NFV_TAP0" "$T/dst.log" || fail "the destination did not open its tap"
	grep -q "NIC(s)" "$T/dst.log" && fail "the destination refused the NIC"
	for _ in $(seq 100); do kill -0 "$DST_PID" 2>/dev/null || break; sleep 0.1; done
	wait "$DST_PID"; rc=$?
	[ "$rc" = 0 ] || fail "destination exit $rc after a completed migration"
	pass "the NIC migrated with the VM, each host on its own tap"
	;;
refuse)
	[ "$mrc" != 0 ] || fail "migrate to a destination without the NIC succeeded"
	grep -q "the source VM has 1 NIC(s), this destination 0" "$T/mig.json" "$T/mig.err" ||
		fail "no reason naming the NICs: $(cat "$T/mig.json" "$T/mig.err")"
	wait_dst_exit_failed
	src_status
	[ "$(jget "$T/src.json" "d.get('vm-status')")" = running ] || fail "source VM not running: $(cat "$T/src.json")"
	pass "a destination without the NIC refused it, the source runs on"
	;;
*) fail "case $case" ;;
esac
