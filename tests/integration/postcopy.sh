#!/bin/bash
# Invariants of postcopy, the real binary, both ends on this host:
#   hot-set          a hot set rewritten faster than the link moves it (80 MB/s
#                    behind a 32 MB/s cap, 10 ms limit; IT_ACCEL=kvm: a KVM
#                    guest, below) never converges in
#                    precopy; with --postcopy-after auto it switches by itself,
#                    completes, the digests match, and the verify workload's
#                    exact check passes on the destination once every page
#                    is there; the breakdown adds up to the downtime.
#   start-postcopy   a running precopy migration (postcopy allowed) switches
#                    when told (--start-postcopy) and completes, verified.
#   cancel           a cancel before the switch leaves the VM running on the
#                    source, intact; the destination fails, never resumed.
#   cut SEED         (godwit-fi) every connection cut at a seeded point of a
#                    long postcopy (src-pc-cut / dst-pc-cut, the seed picks
#                    side and page count and is printed): both sides report
#                    postcopy-paused, the destination guest runs on; the
#                    destination listens again (--recover), the source
#                    reconnects (--resume --to), the migration completes,
#                    verified, checked, no page lost or placed twice.
#   link-down        across two network namespaces, the veth link goes down
#                    during postcopy (no reset: both ends notice by timeout),
#                    comes back, and a recovery completes, verified.
#   dst-killed       the destination dies during postcopy: the source stays
#                    postcopy-paused with its VM paused (it never runs two
#                    copies) and refuses to resolve to itself: the VM is lost,
#                    as docs/protocol.md says.
# Rates are fixed (the workload's and a bandwidth cap) far below this
# machine's speed: the outcome never depends on timing.
# Usage: postcopy.sh CASE [SEED]
. "$(dirname "$0")/lib.sh"
case=$1
hot=(--memory 128M --fill none --workload verify:ws=32M,rate=20000)
link=(--max-bandwidth 32M --downtime-limit 10)
if [ "$IT_ACCEL" = kvm ]; then
	# KVM guests run emulated on nested hosts (~1000 pages/s per vCPU, kvm.md):
	# two vCPUs rewriting all of a 4 MiB RAM (rate asked above what they reach)
	# behind a 1 MB/s cap; every round leaves most of it dirty, so precopy
	# never converges and the vCPUs fault on missing pages after the switch.
	hot=(--memory 4M --fill mix --vcpus 2 --workload verify:ws=4M,rate=5000)
	link=(--max-bandwidth 1M --downtime-limit 10)
fi
# A long postcopy, whatever the machine's speed: 128 MiB of data, round 0 at
# 8 MiB/s interrupted by --start-postcopy after 1 MiB, so about 127 MiB are
# missing at the switch and arrive at 8 MiB/s (plus what the guest asks for:
# at most 2000 pages/s); the cut, the link-down and the kill land in it.
big=(--memory 128M --fill mix --workload verify:ws=32M,rate=2000)

# long_postcopy [migrate args]: migrate, switch early, wait for the switch:
# postcopy-active, or postcopy-paused already when a cut fault (in-band, a
# page count) struck before this poll saw active.
long_postcopy() {
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --max-bandwidth 8M --downtime-limit 10 --postcopy \
		--detach "$@" >/dev/null || fail "migrate --detach"
	for _ in $(seq 1 600); do
		src_status
		[ "$(jget "$T/src.json" "d.get('ram', {}).get('transferred', 0) > (1 << 20)")" = True ] && break
		sleep 0.05
	done
	"$GODWIT" migrate --api "$T/src.sock" --start-postcopy >/dev/null || fail "--start-postcopy"
	wait_status "$T/src.sock" "postcopy-active|postcopy-paused" || fail "no switch: $(tail -n 3 "$T/src.log")"
}

# check_completed FILE: completed through postcopy, verified, breakdown adds up.
check_completed() {
	local f=$1
	[ "$(jget "$f" "d['status']")" = completed ] || fail "status $(jget "$f" "d['status']"): $(jget "$f" "d.get('error-desc')")"
	[ "$(jget "$f" "d['verify']")" = ok ] || fail "verify $(jget "$f" "d['verify']")"
	[ "$(jget "$f" "'postcopy' in d and d['postcopy']['remaining'] == 0 and d['postcopy']['pages'] > 0")" = True ] ||
		fail "no postcopy figures: $(jget "$f" "d.get('postcopy')")"
	jget "$f" "abs(sum(d['downtime-breakdown'].values()) - d['downtime']) < 0.01" | grep -qx True ||
		fail "breakdown $(jget "$f" "d['downtime-breakdown']") does not add up to $(jget "$f" "d['downtime']") ms"
}

# dst_check: the destination's workload check, run once every page arrived.
dst_check() {
	local out
	for _ in $(seq 1 600); do
		out=$("$GODWIT" status --api "$T/dst.sock" --json 2>/dev/null) &&
			echo "$out" >"$T/dst.json" &&
			[ "$(jget "$T/dst.json" "d.get('verify-check', 'n/a')")" != n/a ] && break
		sleep 0.1
	done
	[ "$(jget "$T/dst.json" "d.get('verify-check')")" = ok ] ||
		fail "destination check: $(jget "$T/dst.json" "d.get('verify-check')")"
	"$GODWIT" check --api "$T/dst.sock" >"$T/check.out" 2>&1 || fail "destination check: $(cat "$T/check.out")"
}

# wait_status API STATUS[|STATUS...]: until the migration on API reports one of them.
wait_status() {
	local st
	for _ in $(seq 1 1200); do
		st=$("$GODWIT" status --api "$1" --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin).get('status'))" 2>/dev/null)
		case "|$2|" in *"|$st|"*) [ -n "$st" ] && return 0 ;; esac
		case $st in completed|failed|cancelled) return 1 ;; esac
		sleep 0.1
	done
	return 1
}

# recover_and_finish: --recover on the destination, --resume on the source, report in $T/mig.json.
recover_and_finish() {
	local url
	url=$("$GODWIT" migrate --api "$T/dst.sock" --recover "tcp:${1:-127.0.0.1}:0" | sed -n 's/^recovering: listening at //p')
	[ -n "$url" ] || fail "--recover printed no URL"
	"$GODWIT" migrate --api "$T/src.sock" --resume --to "$url" --json >"$T/mig.json" 2>"$T/mig.err" ||
		fail "resume: $(tail -n 3 "$T/mig.err") $(cat "$T/mig.json")"
}

case $case in
hot-set)
	start_dst tcp:127.0.0.1:0
	start_src "${hot[@]}"
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" "${link[@]}" --postcopy-after auto --json \
		>"$T/mig.json" 2>"$T/mig.err" || fail "migrate exit $?: $(tail -n 3 "$T/mig.err")"
	check_completed "$T/mig.json"
	grep -q "postcopy_decided reason=auto" "$T/src.log" || fail "not switched by the auto rule"
	jget "$T/mig.json" "all(r['expected-downtime'] > 10 for r in d['round-table'])" | grep -qx True ||
		fail "precopy looked like converging: $(jget "$T/mig.json" "[r['expected-downtime'] for r in d['round-table']]")"
	dst_check
	src_status
	[ "$(jget "$T/src.json" "d.get('vm-status')")" = postmigrate ] || fail "source VM $(jget "$T/src.json" "d.get('vm-status')")"
	pass "hot-set: $(jget "$T/mig.json" "'%d rounds, downtime %.1f ms, postcopy %.0f ms, %d requests, %d pushed' % (d['rounds'], d['downtime'], d['postcopy']['postcopy-time'], d['postcopy']['requests'], d['postcopy']['pushed'])")" ;;
start-postcopy)
	start_dst tcp:127.0.0.1:0
	start_src "${hot[@]}"
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" "${link[@]}" --postcopy --detach >/dev/null ||
		fail "migrate --detach"
	for _ in $(seq 1 600); do
		src_status
		[ "$(jget "$T/src.json" "d.get('rounds', 0) >= 2")" = True ] && break
		sleep 0.1
	done
	[ "$(jget "$T/src.json" "d.get('status')")" = active ] || fail "not in precopy: $(jget "$T/src.json" "d.get('status')")"
	"$GODWIT" migrate --api "$T/src.sock" --start-postcopy | grep -q "postcopy requested" || fail "--start-postcopy"
	"$GODWIT" migrate --api "$T/src.sock" --start-postcopy >/dev/null 2>&1 && fail "a second --start-postcopy accepted"
	wait_status "$T/src.sock" completed || fail "did not complete"
	sleep 0.5	# the source waits for VERIFIED before it says completed; read it again
	src_status
	cp "$T/src.json" "$T/mig.json"
	check_completed "$T/mig.json"
	grep -q "postcopy_decided reason=request" "$T/src.log" || fail "not switched by the request"
	dst_check
	pass "start-postcopy: $(jget "$T/mig.json" "'switched after %d rounds, downtime %.1f ms' % (d['rounds'], d['downtime'])")" ;;
cancel)
	start_dst tcp:127.0.0.1:0
	start_src "${hot[@]}"
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" "${link[@]}" --postcopy --detach >/dev/null ||
		fail "migrate --detach"
	sleep 1
	"$GODWIT" migrate --api "$T/src.sock" --cancel >/dev/null || fail "cancel"
	wait_status "$T/src.sock" cancelled || fail "not cancelled"
	wait_dst_exit_failed
	assert_source_alive_and_consistent
	grep -q postcopy_active "$T/src.log" && fail "switched anyway"
	pass "cancel: before the switch, the VM runs on the source" ;;
cut)
	seed=${2:-$RANDOM}
	[ -x "${GODWIT_FI:-}" ] || skip "no godwit-fi"
	GODWIT=$GODWIT_FI
	side=$((seed % 2)) n=$(( (seed * 7919) % 20000 ))
	echo "seed $seed: cut after $n pages $([ $side = 0 ] && echo pushed by the source || echo placed by the destination)"
	if [ $side = 0 ]; then SRC_FAULT="src-pc-cut:$n"; else DST_FAULT="dst-pc-cut:$n"; fi
	start_dst tcp:127.0.0.1:0 --set io-timeout-ms=3000
	start_src "${big[@]}" --set io-timeout-ms=3000
	long_postcopy
	wait_status "$T/dst.sock" postcopy-paused || fail "destination not paused: $(tail -n 3 "$T/dst.log")"
	wait_status "$T/src.sock" postcopy-paused || fail "source not paused: $(tail -n 3 "$T/src.log")"
	"$GODWIT" status --api "$T/src.sock" | grep -q "PAUSED" || fail "status text does not say paused"
	p1=$("$GODWIT" status --api "$T/dst.sock" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['guest-progress-count'])")
	sleep 0.3
	p2=$("$GODWIT" status --api "$T/dst.sock" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['guest-progress-count'])")
	echo "destination guest while paused: $p1 -> $p2 pages"
	recover_and_finish
	check_completed "$T/mig.json"
	[ "$(jget "$T/mig.json" "d['postcopy']['recoveries'] >= 1 and d['postcopy']['paused-time'] > 0")" = True ] ||
		fail "no recovery in the figures"
	jget "$T/mig.json" "d['postcopy']['placed-pushed'] + d['postcopy']['placed-requested'] == d['postcopy']['pages']" |
		grep -qx True || fail "pages placed $(jget "$T/mig.json" "d['postcopy']")"
	dst_check
	pass "cut seed $seed: $(jget "$T/mig.json" "'paused %.0f ms, %d recoveries, postcopy %.0f ms' % (d['postcopy']['paused-time'], d['postcopy']['recoveries'], d['postcopy']['postcopy-time'])")" ;;
link-down)
	. "$(dirname "$0")/netns.sh"
	netns_available || skip "cannot create network namespaces (needs root / CAP_NET_ADMIN)"
	name="pc$$"
	trap 'cleanup; netns_teardown "$name"' EXIT
	netns_setup "$name" none || fail "netns_setup"
	DST_WRAP="ip netns exec $NETNS_DST"
	SRC_WRAP="ip netns exec $NETNS_SRC"
	start_dst "tcp:$NETNS_DST_ADDR:0" --set io-timeout-ms=2000
	start_src "${big[@]}" --set io-timeout-ms=2000
	long_postcopy
	ip -n "$NETNS_SRC" link set veth0 down || fail "link down"
	wait_status "$T/dst.sock" postcopy-paused || fail "destination did not notice"
	wait_status "$T/src.sock" postcopy-paused || fail "source did not notice"
	ip -n "$NETNS_SRC" link set veth0 up || fail "link up"
	recover_and_finish "$NETNS_DST_ADDR"
	check_completed "$T/mig.json"
	dst_check
	pass "link-down: $(jget "$T/mig.json" "'paused %.0f ms, postcopy %.0f ms' % (d['postcopy']['paused-time'], d['postcopy']['postcopy-time'])")" ;;
dst-killed)
	start_dst tcp:127.0.0.1:0
	start_src "${big[@]}"
	long_postcopy
	kill -9 "$DST_PID"
	wait_status "$T/src.sock" postcopy-paused || fail "source not paused"
	src_status
	[ "$(jget "$T/src.json" "d.get('vm-status')")" = paused ] || fail "source VM $(jget "$T/src.json" "d.get('vm-status')")"
	"$GODWIT" migrate --api "$T/src.sock" --resolve source >/dev/null 2>&1 &&
		fail "resolved to the source although the destination ran the VM"
	sleep 0.5
	src_status
	[ "$(jget "$T/src.json" "d.get('vm-status')")" = paused ] || fail "source VM resumed"
	pass "dst-killed: the source stays paused and holds its pages (the VM is lost)" ;;
*) fail "case $case" ;;
esac
