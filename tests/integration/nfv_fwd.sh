#!/bin/bash
# Invariant: frames pass through the guest's own driver (--workload l2fwd
# or echo, common/vnet_drv.c) between the hosts of nfv_topo.sh, and stay correct
# across a migration and a failed one. bench/gwpktgen in the generator's
# namespace sends numbered, CRC-checked frames to the guest's NIC at a
# bounded rate (FWD_PPS: 1000 on the soft VM, 200 on KVM, whose guest
# instructions are emulated); l2fwd sends them back with the MACs swapped
# (one NIC) or out of the other NIC (two NICs, --nics 2).
#   migrate    the VM moves from the source host to the destination while a
#              first run of frames flows (0 duplicated, 0 corrupted, some
#              received); then a second run reaches the destination's guest
#              (0 duplicated, 0 corrupted, frames back, the guest's progress
#              counter grows): frames flow after the migration.
#   migrate2   the same with two NICs (frames in by NIC 0, out by NIC 1).
#   echo       the same with --workload echo (interrupt-driven: the guest
#              halts between frames).
#   dst-killed the destination is killed (SIGKILL) mid-precopy while frames
#              flow: the migration fails, the source's guest forwards on
#              (0 duplicated, 0 corrupted, a second run all back through it).
# Counts decide, never times: a frame lost at the switchover is allowed
# (the switch learns the moved MAC from the announce), a duplicate or a bad
# CRC never. Skips (77) without root, namespaces or /dev/net/tun.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nfv_topo.sh"
case=${1:?usage: nfv_fwd.sh migrate|migrate2|echo|dst-killed}
GWPKTGEN=${GWPKTGEN:-$(dirname "$GODWIT_BIN")/../bench/gwpktgen}
"$GODWIT" run --workload l2fwd >/dev/null 2>"$T/usage.err"
rc=$?
[ "$rc" = 2 ] || fail "l2fwd without --nic: exit $rc, not 2 ($(cat "$T/usage.err"))"
grep -q -- "--nic" "$T/usage.err" || fail "the usage error does not name --nic: $(cat "$T/usage.err")"
nfv_available || skip "cannot build the NFV topology (needs root, ip, /dev/net/tun)"
[ -x "$GWPKTGEN" ] || fail "gwpktgen not built ($GWPKTGEN)"
pps=${FWD_PPS:-$([ "$IT_ACCEL" = kvm ] && echo 200 || echo 1000)}
nics=1 wl=l2fwd
[ "$case" = migrate2 ] && nics=2
[ "$case" = echo ] && wl=echo
name="fw$$"
trap 'cleanup; nfv_teardown "$name"' EXIT
nfv_setup "$name" --link none --nics "$nics" || fail "nfv_setup"
nic=(--nic "tap=$NFV_TAP0,mac=$NFV_VM_MAC0")
[ "$nics" = 2 ] && nic+=(--nic "tap=$NFV_TAP1,mac=$NFV_VM_MAC1")
vm=(--vcpus 1 "${nic[@]}")

# gen RUN SECONDS: frames from the generator, gwpktgen's JSON in $T/RUN.json.
gen() {
	ip netns exec "$NFV_GEN" "$GWPKTGEN" --iface "$NFV_GEN_IF" --dst-mac "$NFV_VM_MAC0" \
		--pps "$pps" --seconds "$2" --linger-ms 1000 --start-file "$T/$1.start" --json \
		>"$T/$1.json" 2>"$T/$1.log"
}
# check_run RUN WHAT: no duplicate, no corruption, some frames back.
check_run() {
	local k
	for k in duplicated corrupted; do
		[ "$(jget "$T/$1.json" "d['$k']")" = 0 ] || fail "$2: $k = $(jget "$T/$1.json" "d['$k']"): $(cat "$T/$1.json")"
	done
	[ "$(jget "$T/$1.json" "d['received']")" -gt 0 ] || fail "$2: no frame came back: $(cat "$T/$1.json")"
}
progress() { "$GODWIT" status --api "$T/$1.sock" --json | python3 -c 'import json,sys; print(json.load(sys.stdin).get("guest-progress-count", 0))'; }
wait_started() { for _ in $(seq 100); do [ -s "$T/$1.start" ] && return 0; sleep 0.1; done; fail "gwpktgen did not start: $(cat "$T/$1.log")"; }

SRC_WRAP="ip netns exec $NFV_SRC" start_src "${vm[@]}" --memory 128M --fill mix --workload "$wl"
if [ "$IT_ACCEL" = kvm ] && ! grep -q "guest=$wl" "$T/src.log"; then
	skip "this build's KVM VM has no $wl guest"
fi
# A first run teaches the switch where the guest's MACs are: frames to an
# unknown MAC are flooded to every port, and a destination's tap that is
# already open would keep those copies for its guest, which would send them
# back after the migration (duplicates made by the wire, not the VM). So the
# destination opens its taps only once the switch has learned. (With two
# NICs the source host's bridge floods those first frames to both taps, and
# l2fwd forwards whatever comes in: this run may count duplicates.)
gen warm 1 || fail "gwpktgen: $(cat "$T/warm.log")"
[ "$(jget "$T/warm.json" "d['received'] > 0 and d['corrupted'] == 0")" = True ] ||
	fail "frames through the source's guest: $(cat "$T/warm.json")"
DST_WRAP="ip netns exec $NFV_DST" start_dst "tcp:$NFV_DST_ADDR:0" "${vm[@]}"
gen during 8 &
gen_pid=$!
PIDS+=("$gen_pid")
wait_started during
sleep 1	# frames flow through the source's guest before the migration starts
mig=()
[ "$case" = dst-killed ] && mig=(--max-bandwidth 16M)	# ~8 s of precopy: killed inside it
"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" "${mig[@]}" --json >"$T/mig.json" 2>"$T/mig.err" &
mig_pid=$!
if [ "$case" = dst-killed ]; then
	for _ in $(seq 100); do grep -q "round_start round=0" "$T/src.log" && break; sleep 0.1; done
	sleep 0.5
	kill -9 "$DST_PID"
fi
wait "$mig_pid"; mrc=$?
wait "$gen_pid" || fail "gwpktgen: $(cat "$T/during.log")"
check_run during "frames during the migration"

case $case in
migrate|migrate2|echo)
	[ "$mrc" = 0 ] || fail "migrate exit $mrc: $(cat "$T/mig.json" "$T/mig.err")"
	[ "$(jget "$T/mig.json" "d['status']")" = completed ] || fail "status $(cat "$T/mig.json")"
	[ "$(jget "$T/mig.json" "d['verified']")" = True ] || fail "not verified: $(cat "$T/mig.json")"
	p1=$(progress dst)
	gen after 2 || fail "gwpktgen: $(cat "$T/after.log")"
	check_run after "frames after the migration"
	p2=$(progress dst)
	[ "$p2" -gt "$p1" ] || fail "the destination's guest forwarded nothing ($p1 -> $p2)"
	pass "frames through the guest across the migration: during $(jget "$T/during.json" "'%d/%d back' % (d['received'], d['sent'])"), after $(jget "$T/after.json" "'%d/%d back' % (d['received'], d['sent'])"), 0 duplicated, 0 corrupted; progress $p1 -> $p2"
	;;
dst-killed)
	[ "$mrc" != 0 ] || fail "the migration survived its destination"
	src_status
	[ "$(jget "$T/src.json" "d.get('vm-status')")" = running ] || fail "source VM not running: $(cat "$T/src.json")"
	p1=$(progress src)
	gen after 2 || fail "gwpktgen: $(cat "$T/after.log")"
	check_run after "frames after the failed migration"
	[ "$(jget "$T/after.json" "d['lost']")" = 0 ] || fail "frames lost through the source after the failure: $(cat "$T/after.json")"
	p2=$(progress src)
	[ "$p2" -gt "$p1" ] || fail "the source's guest forwarded nothing ($p1 -> $p2)"
	pass "destination killed mid-precopy: the source's guest forwards on ($(jget "$T/after.json" "'%d/%d back' % (d['received'], d['sent'])"), 0 duplicated, 0 corrupted)"
	;;
*) fail "case $case" ;;
esac
