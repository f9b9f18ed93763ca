#!/bin/bash
# Invariants of escalation (escalate=1, docs/params.md "Escalation"), with a
# guest that dirties 80 MB/s (verify workload, 16 MiB set at 20000 pages/s)
# behind a 32 MB/s link and a 100 ms downtime limit: it never converges by
# itself (test converge-stuck).
#   raise     escalate-downtime-max-us=3000000 in 3 steps: the first step
#             raises the limit to 1066 ms, where the ~0.5 s the model
#             expects fits: one step, downtime-limit, logged and in the
#             statistics and the round events (none at 100 ms, then
#             downtime-limit at 1067 ms); completed, verified; the switchover
#             round's expected downtime is within 5% of the lowest any round
#             had, or follows the 2 rounds (the window) that fit without it.
#   ladder    escalate-downtime-max-us=200000 (under what it needs) in 2
#             steps, no postcopy, converge-policy cancel: the steps come in
#             their order (downtime-limit, downtime-limit, auto-converge,
#             timeout-action, each at most once more than named); either the
#             throttle made it converge (completed, verified) or the last
#             step cancels it ("after every escalation step") and the VM
#             runs on the source, intact.
#   postcopy  postcopy allowed, auto-converge on already (max-cpu-throttle
#             1%: it cannot help), the limit raised once to 200 ms: the
#             steps are downtime-limit then postcopy (auto-converge
#             skipped), postcopy_decided says reason=escalate; completed,
#             verified.
#   live      escalate off at the start, switched on while migrating
#             (migrate --api --set escalate=1): the step follows, completed.
# Steps are triggered by rounds of the model, the guest's rate and the link
# are fixed and far below this machine's speed: no outcome depends on timing.
# Usage: escalate.sh CASE
. "$(dirname "$0")/lib.sh"
case=$1
hot=(--memory 128M --fill none --workload verify:ws=16M,rate=20000)
link=(--max-bandwidth 32M --downtime-limit 100)
esc=(--set escalate=1 --set escalate-window-rounds=2)

steps() { sed -n 's/.* escalate step=\([a-z-]*\) .*/\1/p' "$T/src.log" | tr '\n' ' '; }
completed() {	# completed FILE: completed, verified
	[ "$(jget "$1" "d['status']")" = completed ] || fail "status $(jget "$1" "d['status']"): $(jget "$1" "d.get('error-desc')")"
	[ "$(jget "$1" "d['verify']")" = ok ] || fail "verify $(jget "$1" "d['verify']")"
}
# at_best LIMIT_US WINDOW: the switchover round's expected downtime is within
# 5% of the lowest any round had, or WINDOW rounds that fit LIMIT_US but were
# not near it came right before it (the best did not come back).
at_best() {
	python3 - "$T/src.log" "$1" "$2" <<'PY' || fail "switchover not at the best expected downtime: $(grep -o 'round_end.*expected_downtime_us=[0-9-]*' "$T/src.log" | grep -o 'expected_downtime_us=[0-9-]*' | tr '\n' ' ')"
import re, sys
limit, window = int(sys.argv[2]), int(sys.argv[3])
v = [int(m) for m in re.findall(r'round_end .*?expected_downtime_us=(-?\d+)', open(sys.argv[1]).read())]
v = [x for x in v if x >= 0]
near = lambda x, best: x <= best * 1.05 + 1
ok = bool(v) and (near(v[-1], min(v)) or
                  len(v) > window and all(x <= limit and not near(x, min(v[:i + 1]))
                                          for i, x in enumerate(v) if len(v) - 1 - window <= i < len(v) - 1))
sys.exit(0 if ok else 1)
PY
}

case $case in
raise)
	start_dst tcp:127.0.0.1:0 --exit-after-migrate
	start_src "${hot[@]}"
	"$GODWIT" events --api "$T/src.sock" --until-end >"$T/ev.jsonl" 2>"$T/ev.err" &
	ep=$!
	PIDS+=("$ep")
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" "${link[@]}" "${esc[@]}" \
		--set escalate-downtime-max-us=3000000 --set escalate-downtime-steps=3 --json >"$T/mig.json" 2>"$T/mig.err" ||
		fail "migrate exit $?: $(cat "$T/mig.err")"
	completed "$T/mig.json"
	wait "$ep" || fail "events exited $?: $(cat "$T/ev.err")"
	# The round events: "none" at the user's limit until the step, then the raised limit.
	python3 - "$T/ev.jsonl" <<'PY' || fail "round events: $(grep '"round"' "$T/ev.jsonl")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
seen = [(e['escalate-step'], round(e['downtime-limit'])) for e in ev if e['event'] == 'round' and 'escalate-step' in e]
assert seen and seen[0] == ('none', 100) and seen[-1] == ('downtime-limit', 1067), seen
assert seen == sorted(seen, key=lambda x: x[1]), seen
PY
	[ "$(steps)" = "downtime-limit " ] || fail "steps '$(steps)', want one downtime-limit"
	[ "$(jget "$T/mig.json" "(d['escalate']['step'], d['escalate']['steps'], round(d['escalate']['downtime-limit']))")" = \
	  "('downtime-limit', 1, 1067)" ] || fail "escalate $(jget "$T/mig.json" "d.get('escalate')")"
	at_best 1066666 2
	pass "raise: $(grep -m1 -o 'escalate step=.*' "$T/src.log"); downtime $(jget "$T/mig.json" "d['downtime']") ms"
	;;
ladder)
	start_dst tcp:127.0.0.1:0 --exit-after-migrate
	start_src "${hot[@]}"
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" "${link[@]}" "${esc[@]}" \
		--set escalate-downtime-max-us=200000 --set escalate-downtime-steps=2 --set converge-policy=1 \
		--json >"$T/mig.json" 2>"$T/mig.err"
	rc=$?
	got=$(steps)
	python3 -c "
import sys
order = ['downtime-limit', 'downtime-limit', 'auto-converge', 'timeout-action']
got = sys.argv[1].split()
sys.exit(0 if got and got == order[:len(got)] else 1)" "$got" || fail "steps '$got' out of order"
	if [ "$rc" = 0 ]; then
		completed "$T/mig.json"
		case $got in *auto-converge*) ;; *) fail "completed without auto-converge: '$got'" ;; esac
		pass "ladder: converged after '$got'"
	fi
	[ "$got" = "downtime-limit downtime-limit auto-converge timeout-action " ] || fail "failed after '$got'"
	grep -q "did not converge after every escalation step" "$T/mig.err" "$T/src.log" ||
		fail "no escalation reason: $(cat "$T/mig.err")"
	assert_source_alive_and_consistent
	pass "ladder: '$got', cancelled, the VM runs on the source"
	;;
postcopy)
	start_dst tcp:127.0.0.1:0 --exit-after-migrate
	start_src "${hot[@]}"
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" "${link[@]}" "${esc[@]}" --postcopy \
		--set auto-converge=1 --set max-cpu-throttle=1 --set cpu-throttle-initial=1 \
		--set escalate-downtime-max-us=200000 --set escalate-downtime-steps=1 --json >"$T/mig.json" 2>"$T/mig.err" ||
		fail "migrate exit $?: $(cat "$T/mig.err")"
	completed "$T/mig.json"
	[ "$(steps)" = "downtime-limit postcopy " ] || fail "steps '$(steps)'"
	grep -q "postcopy_decided reason=escalate" "$T/src.log" || fail "no postcopy_decided reason=escalate"
	pass "postcopy: '$(steps)', $(grep -m1 -o 'postcopy_decided reason=[a-z]* round=[0-9]*' "$T/src.log")"
	;;
live)
	start_dst tcp:127.0.0.1:0 --exit-after-migrate
	start_src "${hot[@]}"
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" "${link[@]}" --set escalate-window-rounds=2 \
		--set escalate-downtime-max-us=3000000 --set escalate-downtime-steps=3 --detach >/dev/null ||
		fail "migrate --detach"
	for _ in $(seq 1 600); do
		src_status
		[ "$(jget "$T/src.json" "d.get('rounds', 0) >= 4")" = True ] && break
		sleep 0.1
	done
	[ -z "$(steps)" ] || fail "a step while off: $(steps)"
	[ "$(jget "$T/src.json" "d.get('escalate', {}).get('step')")" = none ] || fail "escalate $(jget "$T/src.json" "d.get('escalate')")"
	"$GODWIT" migrate --api "$T/src.sock" --set escalate=1 || fail "set escalate live"
	for _ in $(seq 1 1200); do
		src_status
		case $(jget "$T/src.json" "d.get('status')") in completed|failed|cancelled) break ;; esac
		sleep 0.1
	done
	completed "$T/src.json"
	case $(steps) in "downtime-limit "*) ;; *) fail "steps '$(steps)'" ;; esac
	pass "live: switched on mid-migration, then '$(steps)'"
	;;
*) fail "case $case" ;;
esac
