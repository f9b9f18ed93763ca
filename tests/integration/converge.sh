#!/bin/bash
# Invariants of convergence, both ends on this host:
#   stuck            a guest that dirties 80 MB/s behind a 32 MB/s link with a
#                    100 ms downtime limit does not converge: while it runs the
#                    status says so and why; at the converge timeout it is
#                    cancelled and the VM runs on the source, intact.
#   auto-converge    the same guest with --auto-converge completes, verified,
#                    with a throttle in the round table.
#   dirty-limit      ... with --dirty-limit 2M (switched on when it does not
#                    converge) completes, verified.
#   dirty-limit-start ... with the limit from round 0 on.
#   parked           an idle TCP connection parked on the destination's port
#                    does not poison the model: an idle guest migrates in at
#                    most two whole passes (it used to loop for ever).
#   balloon          a guest that freed most of its memory and keeps freeing
#                    and reallocating pages (free-page hints) migrates three
#                    times in a row, verified by digests and by its own check.
#   slow-dst         a destination slower than the link (the test build's
#                    dst-slow fault: 2 ms before each PAGES frame) holds MBs
#                    in its socket buffers when the rest fits: the source
#                    counts them, waits for them (switch_deferred) instead of
#                    reading them in the pause, and completes, verified.
#   dirty-rate TRACKER  a guest writing 300 distinct pages/s (it never wraps
#                    its working set meanwhile) behind an 8 MiB/s link, rounds
#                    cut mid-pass: the pages the precopy harvests counted
#                    (round_end's harvested_pages, what the dirty rate,
#                    auto-converge and the dirty limit read) add up to no more
#                    than the guest wrote by its own counter over the
#                    migration (+ a fixed slack per harvest), and at least
#                    half of it; no throttle although auto-converge is on.
#                    TRACKER: kvm-log, kvm-ring (IT_ACCEL=kvm) or uffd-wp.
#   capped           a guest writing 300 pages/s (1.2 MiB/s) behind an 8 MiB/s
#                    max-bandwidth cap (a 2 s downtime limit: above the round
#                    trips of a destination still busy taking in its RAM, far
#                    below the ~12 s to send it) converges at the cap however slowly
#                    its expected downtime falls: no sample of the status
#                    says "NOT converging", one says "converging at the
#                    max-bandwidth cap" (converge-state capped, a hint that
#                    names the cap, an ETA); with the cap lifted live it
#                    completes, verified, and the report says it fits.
#   breakdown        (every case that completes) the downtime breakdown adds
#                    up to the downtime.
# The dirty rate is the workload's fixed rate and the link a fixed cap, both
# far below this machine's speed: the outcome never depends on it.
# Usage: converge.sh CASE [TRACKER]
. "$(dirname "$0")/lib.sh"
case=$1
hot=(--memory 128M --fill none --workload verify:ws=16M,rate=20000)
link=(--max-bandwidth 32M --downtime-limit 100)

# check_completed FILE: completed, verified, breakdown adds up.
check_completed() {
	local f=$1
	[ "$(jget "$f" "d['status']")" = completed ] || fail "status $(jget "$f" "d['status']"): $(jget "$f" "d.get('error-desc')")"
	[ "$(jget "$f" "d['verify']")" = ok ] || fail "verify $(jget "$f" "d['verify']")"
	jget "$f" "abs(sum(d['downtime-breakdown'].values()) - d['downtime']) < 0.01" | grep -qx True ||
		fail "breakdown $(jget "$f" "d['downtime-breakdown']") does not add up to $(jget "$f" "d['downtime']") ms"
}

# dst_check: the destination's own workload check after resume.
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
}

migrate() { "$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --json "$@" >"$T/mig.json" 2>"$T/mig.err"; }

case $case in
stuck)
	start_dst tcp:127.0.0.1:0
	start_src "${hot[@]}"
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" "${link[@]}" --detach >/dev/null ||
		fail "migrate --detach"
	# Wait for the model to have seen a few rounds, then read the verdict.
	for _ in $(seq 1 600); do
		src_status
		[ "$(jget "$T/src.json" "d.get('rounds', 0) >= 4")" = True ] && break
		sleep 0.1
	done
	[ "$(jget "$T/src.json" "d.get('converging')")" = False ] || fail "converging? $(cat "$T/src.json")"
	hint=$(jget "$T/src.json" "d.get('converge-hint')")
	case $hint in *auto-converge*) ;; *) fail "hint does not say what would help: '$hint'" ;; esac
	"$GODWIT" status --api "$T/src.sock" | grep -q "NOT converging" || fail "status text"
	"$GODWIT" migrate --api "$T/src.sock" --set converge-timeout-ms=1 --set converge-policy=1 ||
		fail "set the policy live"
	for _ in $(seq 1 600); do
		src_status
		case $(jget "$T/src.json" "d.get('status')") in failed|cancelled) break ;; esac
		sleep 0.1
	done
	[ "$(jget "$T/src.json" "d.get('status')")" = failed ] || fail "not failed: $(jget "$T/src.json" "d.get('status')")"
	assert_source_alive_and_consistent
	pass "stuck: said '$hint', then cancelled; the VM runs on the source" ;;
auto-converge|dirty-limit|dirty-limit-start)
	case $case in
	auto-converge) extra=(--auto-converge) ;;
	dirty-limit) extra=(--dirty-limit 2M) ;;
	dirty-limit-start) extra=(--dirty-limit 2M --dirty-limit-start) ;;
	esac
	start_dst tcp:127.0.0.1:0
	start_src "${hot[@]}"
	migrate "${link[@]}" "${extra[@]}" || fail "migrate exit $?: $(tail -n 3 "$T/mig.err")"
	check_completed "$T/mig.json"
	dst_check
	case $case in
	auto-converge)
		jget "$T/mig.json" "max(r['cpu-throttle-percentage'] for r in d['round-table']) >= 20" | grep -qx True ||
			fail "no throttle in the round table" ;;
	dirty-limit)
		jget "$T/mig.json" "any(r['dirty-limit'] for r in d['round-table'])" | grep -qx True ||
			fail "no dirty limit in the round table" ;;
	dirty-limit-start)
		jget "$T/mig.json" "d['round-table'][0]['dirty-limit']" | grep -qx True ||
			fail "dirty limit not on in round 0" ;;
	esac
	pass "$case: $(jget "$T/mig.json" "'%d rounds, downtime %.1f ms, throttle %d%%' % (d['rounds'], d['downtime'], max(r['cpu-throttle-percentage'] for r in d['round-table']))")" ;;
capped)
	start_dst tcp:127.0.0.1:0
	start_src --memory 128M --fill mix --workload dirty:ws=16M,pattern=page,rate=300
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --max-bandwidth 8M --downtime-limit 2000 --detach \
		>/dev/null || fail "migrate --detach"
	seen=
	# At most 600 samples: ~12 s to send 100 MiB at the cap, the verdict comes from round 1 on.
	for _ in $(seq 1 600); do
		"$GODWIT" status --api "$T/src.sock" >"$T/st.txt" || fail "status"
		src_status
		grep -q "NOT converging" "$T/st.txt" && fail "a capped link said: $(cat "$T/st.txt")"
		[ "$(jget "$T/src.json" "d.get('converging')")" = True ] || fail "converging false: $(cat "$T/src.json")"
		if [ "$(jget "$T/src.json" "d.get('converge-state')")" = capped ]; then
			grep -q "converging at the max-bandwidth cap" "$T/st.txt" || fail "label: $(cat "$T/st.txt")"
			case $(jget "$T/src.json" "d.get('converge-hint')") in
			"converging at the max-bandwidth cap of "*"fits in about"*) ;;
			*) fail "hint: $(jget "$T/src.json" "d.get('converge-hint')")" ;;
			esac
			[ "$(jget "$T/src.json" "d.get('converge-eta', 0) > 0")" = True ] || fail "no ETA: $(cat "$T/src.json")"
			seen=1
			break
		fi
		case $(jget "$T/src.json" "d.get('status')") in completed|failed|cancelled) break ;; esac
		sleep 0.1
	done
	[ -n "$seen" ] || fail "never capped: $(cat "$T/st.txt")"
	"$GODWIT" migrate --api "$T/src.sock" --max-bandwidth 0 >/dev/null || fail "lift the cap"
	for _ in $(seq 1 600); do
		src_status
		case $(jget "$T/src.json" "d.get('status')")/$(jget "$T/src.json" "d.get('verify')") in
		completed/pending) ;;
		completed/*|failed/*|cancelled/*|unknown/*) break ;;
		esac
		sleep 0.1
	done
	check_completed "$T/src.json"
	grep -q "not_converging" "$T/src.log" && fail "logged not_converging: $(grep not_converging "$T/src.log")"
	pass "capped: $(jget "$T/src.json" "'%d rounds, downtime %.1f ms' % (d['rounds'], d['downtime'])")" ;;
parked)
	start_dst tcp:127.0.0.1:0 --set io-timeout-ms=1500
	start_src --memory 256M --fill mix --workload idle
	port=${DST_URL##*:}
	exec 3<>"/dev/tcp/127.0.0.1/$port" || fail "cannot park a connection"
	# Whole passes (round-max-ms=0): the round count then does not depend on the machine's speed.
	migrate --set round-max-ms=0 || fail "migrate exit $?: $(tail -n 3 "$T/mig.err")"
	exec 3>&-
	check_completed "$T/mig.json"
	[ "$(jget "$T/mig.json" "d['rounds'] <= 2")" = True ] || fail "rounds $(jget "$T/mig.json" "d['rounds']")"
	pass "parked: $(jget "$T/mig.json" "'%d rounds, setup %.0f ms, rtt %.3f ms' % (d['rounds'], d['setup-time'], d['rtt'])")" ;;
dirty-rate)
	tracker=${2:?dirty-rate TRACKER}
	start_dst tcp:127.0.0.1:0
	start_src --memory 64M --fill random --dirty-track "$tracker" --workload dirty:ws=32M,pattern=page,rate=300
	src_status
	p0=$(jget "$T/src.json" "d['guest-progress-count']")
	migrate --max-bandwidth 8M --auto-converge || fail "migrate exit $?: $(tail -n 3 "$T/mig.err")"
	check_completed "$T/mig.json"
	[ "$(jget "$T/mig.json" "d['dirty-backend']")" = "$tracker" ] || fail "tracker $(jget "$T/mig.json" "d.get('dirty-backend')")"
	src_status	# paused since the switchover: the count is final
	p1=$(jget "$T/src.json" "d['guest-progress-count']")
	# Per harvest: the sys block's pages (vCPU areas, stacks, page tables); per vCPU: one pacing batch.
	read -r rounds counted < <(sed -n 's/.* round_end .* harvested_pages=\([0-9]*\).*/\1/p' "$T/src.log" |
		awk '{ n++; s += $1 } END { print n + 0, s + 0 }')
	wrote=$((p1 - p0))
	[ "$rounds" -ge 3 ] || fail "$rounds precopy rounds: the link cap did not make several"
	[ "$counted" -le $((wrote + rounds * 32 + 64)) ] ||
		fail "$tracker: the harvests counted $counted pages over $rounds rounds, the guest wrote $wrote"
	[ $((counted * 2)) -ge "$wrote" ] ||
		fail "$tracker: the harvests counted $counted pages over $rounds rounds, the guest wrote $wrote"
	jget "$T/mig.json" "max(r['cpu-throttle-percentage'] for r in d['round-table'])" | grep -qx 0 ||
		fail "$tracker: throttled a guest dirtying 1.2 MB/s behind an 8 MiB/s link"
	pass "dirty-rate $tracker: $rounds harvests counted $counted pages, the guest wrote $wrote; rates $(jget "$T/mig.json" "[r['dirty-rate-pps'] for r in d['round-table']]")" ;;
balloon)
	for i in 1 2 3; do
		rm -f "$T"/*.sock
		start_dst tcp:127.0.0.1:0
		start_src --memory 256M --vcpus 2 --fill mix --workload balloon:window=32,rate=20000
		# Filled (phase 0 writes every page once), then churning.
		for _ in $(seq 1 1200); do
			src_status
			[ "$(jget "$T/src.json" "d.get('guest-progress-count', 0) > 70000")" = True ] && break
			sleep 0.1
		done
		migrate || fail "run $i: migrate exit $?: $(tail -n 3 "$T/mig.err")"
		check_completed "$T/mig.json"
		[ "$(jget "$T/mig.json" "d['ram']['free-hinted'] > 0")" = True ] || fail "run $i: no hints taken"
		dst_check
		echo "run $i: $(jget "$T/mig.json" "'hinted %d, discarded %d, normal %d pages' % (d['ram']['free-hinted'], d['ram']['free-discarded'], d['ram']['normal'])")"
		"$GODWIT" quit --api "$T/dst.sock" >/dev/null 2>&1
		"$GODWIT" quit --api "$T/src.sock" >/dev/null 2>&1
		wait "$DST_PID" "$SRC_PID" 2>/dev/null
	done
	pass "balloon: three migrations verified" ;;
slow-dst)
	GODWIT=${GODWIT_FI:?GODWIT_FI must point at the fault-injection build}
	DST_FAULT=dst-slow:2000 start_dst tcp:127.0.0.1:0
	start_src --memory 256M --fill mix --workload verify:rate=2000
	migrate --channels 2 || fail "migrate exit $?: $(tail -n 3 "$T/mig.err")"
	check_completed "$T/mig.json"
	dst_check
	deferred=$(grep -m1 "switch_deferred" "$T/src.log") || fail "no switch_deferred: the bytes in flight were not counted"
	bytes=$(sed -n 's/.* in_flight_bytes=\([0-9]*\).*/\1/p' <<<"$deferred")
	[ "${bytes:-0}" -gt 1048576 ] || fail "in flight: '$deferred'"
	pass "slow-dst: $(sed 's/.*switch_deferred //' <<<"$deferred"); downtime $(jget "$T/mig.json" "'%.1f ms' % d['downtime']")" ;;
*) fail "case $case" ;;
esac
