#!/bin/bash
# Invariant (for operators): the real binary does what godwit(1) says, case by case:
#  ctrl-c       Ctrl-C (SIGINT) on an attached `godwit migrate` cancels the migration
#               and says so (exit 130); the source keeps running its VM; a second
#               SIGINT leaves without waiting
#  events       `godwit events --api` follows setup, active, the rounds (numbered from
#               0, as the report's table) and the end, as JSON lines
#  params       parameters set by godwit's and QEMU's names read back with `godwit
#               params --api` (QEMU's units converted), nearest-name suggestions
#  dst-status   after a migration the destination's status shows what it received:
#               bytes, RAM size, pages by kind, codec as asked and per channel as used,
#               rounds as the source counts them
#  idle-dst     an idle destination stopped by SIGTERM or `quit` exits 0 with "no
#               migration received" and no ERROR line
#  progress     --progress=always without a terminal prints plain progress lines with
#               round, percent, ETA; --timeline writes samples and one row per round;
#               the report's "source vm" is postmigrate (read after it settled)
#  defer        --incoming defer, then `godwit migrate --incoming URL`, then a migration
#  failure      a failed migration's report shows the reason and phase, no block of zeros
# Usage: ops.sh CASE. Timing never decides: waits are bounded, no duration is asserted.
. "$(dirname "$0")/lib.sh"
case=$1

# status_of SOCK EXPR: a python expression over the status JSON `d`.
status_of() {
	"$GODWIT" status --api "$1" --json >"$T/st.$$.json" 2>/dev/null || return 1
	jget "$T/st.$$.json" "$2"
}
# wait_for SOCK EXPR: until the python expression is True (bounded).
wait_for() {
	for _ in $(seq 1 600); do
		[ "$(status_of "$1" "$2" 2>/dev/null)" = True ] && return 0
		sleep 0.1
	done
	fail "waited in vain for $2 on $1: $(cat "$T/st.$$.json" 2>/dev/null)"
}

case $case in
ctrl-c)
	start_dst unix:"$T/mig.sock"
	start_src --memory 256M --fill random --workload verify:rate=5000
	# A cap far below what 256 MiB needs keeps it running until the signal.
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --max-bandwidth 4M >"$T/m.out" 2>"$T/m.err" &
	mp=$!
	wait_for "$T/src.sock" "d['status'] == 'active'"
	kill -INT "$mp"
	wait "$mp"; rc=$?
	[ "$rc" = 130 ] || fail "migrate exited $rc after Ctrl-C: $(cat "$T/m.err")"
	grep -q "cancelling the migration" "$T/m.err" || fail "no 'cancelling' message: $(cat "$T/m.err")"
	grep -q "^status: *cancelled" "$T/m.out" || fail "report does not say cancelled: $(cat "$T/m.out")"
	assert_source_alive_and_consistent
	wait_dst_exit_failed
	# A second Ctrl-C leaves at once; the cancel still happens.
	start_dst unix:"$T/mig2.sock"
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --max-bandwidth 4M >"$T/m2.out" 2>"$T/m2.err" &
	mp=$!
	wait_for "$T/src.sock" "d['status'] == 'active'"
	kill -INT "$mp"
	for _ in $(seq 1 50); do grep -q "cancelling" "$T/m2.err" && break; sleep 0.1; done
	kill -INT "$mp" 2>/dev/null
	wait "$mp"; rc=$?
	[ "$rc" = 130 ] || fail "migrate exited $rc after two Ctrl-C"
	wait_for "$T/src.sock" "d['status'] == 'cancelled' and d['vm-status'] == 'running'"
	pass "Ctrl-C cancels, the source keeps its VM; a second one leaves"
	;;
events)
	start_dst unix:"$T/mig.sock"
	start_src --memory 128M --fill mix --workload dirty:ws=16M,pattern=page,rate=20000
	"$GODWIT" events --api "$T/src.sock" --until-end >"$T/ev.jsonl" 2>"$T/ev.err" &
	ep=$!
	sleep 0.3	# the stream is registered before the migration (not a pass/fail timing)
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --json >"$T/m.json" || fail "migration failed"
	wait "$ep" || fail "events exited $?: $(cat "$T/ev.err")"
	python3 - "$T/ev.jsonl" "$T/m.json" <<'EOF' || fail "events: $(cat "$T/ev.jsonl")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
final = json.load(open(sys.argv[2]))
st = [e['status'] for e in ev if e['event'] == 'status']
rounds = [e['round'] for e in ev if e['event'] == 'round']
assert st[0] == 'setup' and 'active' in st and st[-1] == 'completed', st
assert rounds == list(range(len(rounds))), rounds
# precopy rounds, then the final one: the final round's number is the report's count
assert rounds[-1] == final['rounds'], (rounds, final['rounds'])
assert [e for e in ev if e['event'] == 'round'][-1]['final'] is True
end = [e for e in ev if e['event'] == 'status'][-1]
assert end['vm-status'] == 'postmigrate', end      # announced once settled
assert all('time' in e and 'transferred' in e for e in ev if e['event'] != 'vm')
# held inside the downtime (events.c), then delivered: none lost, in order, with their times
assert 'device' in st and 'handover' in st, st
times = [e['time'] for e in ev if e['event'] != 'vm']
assert times == sorted(times), times
print(len(ev), 'events', st, 'rounds', rounds)
EOF
	pass "events: setup, active, rounds 0..N, completed once postmigrate"
	;;
params)
	start_src --memory 32M --set downtime-limit=250 --set multifd-channels=3
	"$GODWIT" migrate --api "$T/src.sock" --set xbzrle-cache-size=32M --set max-bandwidth-bps=100M \
		>/dev/null || fail "set by name"
	echo '{"command":"set","vcpu-dirty-limit":2,"compress":"zstd"}' |
		socat - UNIX-CONNECT:"$T/src.sock" >"$T/set.json" || fail "socat"
	grep -q '"ok":true' "$T/set.json" || fail "JSON set refused: $(cat "$T/set.json")"
	"$GODWIT" params --api "$T/src.sock" --json >"$T/p.json" || fail "params --api"
	python3 - "$T/p.json" <<'EOF' || fail "params read back: $(cat "$T/p.json")"
import json, sys
p = json.load(open(sys.argv[1]))['parameters']
v = {k: x['value'] for k, x in p.items()}
assert v['downtime-limit-us'] == 250000, v['downtime-limit-us']      # ms -> us
assert v['channels'] == 3
assert v['xbzrle-cache-bytes'] == 32 << 20
assert v['max-bandwidth-bps'] == 100 << 20
assert v['dirty-limit-bps'] == 2 << 20                                 # MiB/s -> bytes/s
assert p['compress']['name'] == 'zstd' and v['compress'] == 1
assert p['verify']['value'] == 1 and p['verify']['default'] == 1
EOF
	"$GODWIT" params --api "$T/src.sock" | grep -q "downtime-limit-us *250000 *(changed)" ||
		fail "text readback: $("$GODWIT" params --api "$T/src.sock")"
	"$GODWIT" migrate --api "$T/src.sock" --set downtime-limt=5 2>"$T/e1" && fail "typo accepted"
	grep -q "did you mean 'downtime-limit'" "$T/e1" || fail "no suggestion: $(cat "$T/e1")"
	"$GODWIT" migrate --api "$T/src.sock" --set max-bandwith=5 2>"$T/e2" && fail "typo accepted"
	grep -q "did you mean 'max-bandwidth'" "$T/e2" || fail "no suggestion: $(cat "$T/e2")"
	echo 'set multifd-chanels=2' | socat - UNIX-CONNECT:"$T/src.sock" | grep -q "did you mean 'multifd-channels'" ||
		fail "API: no suggestion"
	"$GODWIT" run --set downtime-limit=0 --memory 16M 2>"$T/e3" && fail "out of range accepted"
	grep -q "downtime-limit-us" "$T/e3" || fail "range error does not name godwit's parameter: $(cat "$T/e3")"
	"$GODWIT" params extra 2>/dev/null; [ $? = 2 ] || fail "params accepted an argument"
	"$GODWIT" version extra 2>/dev/null; [ $? = 2 ] || fail "version accepted an argument"
	pass "parameters by godwit's and QEMU's names read back; nearest names suggested"
	;;
dst-status)
	start_dst unix:"$T/mig.sock"
	start_src --memory 256M --fill mix --workload dirty:ws=32M,pattern=page,rate=20000
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --channels 2 --compress auto --json \
		>"$T/m.json" || fail "migration failed"
	wait_for "$T/dst.sock" "d['status'] == 'completed' and d['settled']"
	"$GODWIT" status --api "$T/dst.sock" --json >"$T/d.json"
	"$GODWIT" status --api "$T/dst.sock" >"$T/d.txt"
	python3 - "$T/m.json" "$T/d.json" <<'EOF' || fail "destination status: $(cat "$T/d.json")"
import json, sys
s = json.load(open(sys.argv[1])); d = json.load(open(sys.argv[2]))
assert d['role'] == 'destination' and d['vm-status'] == 'running'
r = d['ram']
assert r['total'] == s['ram']['total'] == 256 << 20, (r['total'], s['ram']['total'])
# every page byte the source sent arrived (each channel counts what it read); on the
# control connection the source's last frames may come after the destination stopped reading
assert d['channel-bytes'] == s['channel-bytes'], (d['channel-bytes'], s['channel-bytes'])
assert 0 <= s['ram']['transferred'] - r['transferred'] < 4096, (r['transferred'], s['ram']['transferred'])
assert r['normal'] == s['ram']['normal'] and r['duplicate'] == s['ram']['duplicate']
assert r['mbps'] > 0 and r['pages-per-second'] > 0
assert d['compress'] == 'auto' == s['compress']
assert d['rounds'] == s['rounds'], (d['rounds'], s['rounds'])
assert len(d['channel-bytes']) == 2 and len(d['channel-codecs']) == 2
assert d['channel-codecs'] == s['channel-codecs'], (d['channel-codecs'], s['channel-codecs'])
EOF
	grep -q "^received: " "$T/d.txt" && grep -q "channels: *#0" "$T/d.txt" ||
		fail "destination report: $(cat "$T/d.txt")"
	grep -q "dirty tracking" "$T/d.txt" && fail "destination report shows dirty tracking"
	pass "the destination's status says what it received"
	;;
idle-dst)
	start_dst tcp:127.0.0.1:0
	kill -TERM "$DST_PID"; wait "$DST_PID"; rc=$?
	[ "$rc" = 0 ] || fail "idle destination exited $rc on SIGTERM: $(cat "$T/dst.log")"
	grep -q "no migration received" "$T/dst.log" || fail "no 'no migration received'"
	grep -q " ERROR " "$T/dst.log" && fail "ERROR lines: $(grep ERROR "$T/dst.log")"
	mv "$T/dst.log" "$T/dst1.log"
	start_dst unix:"$T/mig.sock"
	status_of "$T/dst.sock" "d['status']" | grep -qx none || fail "idle destination status not none"
	"$GODWIT" status --api "$T/dst.sock" | grep -q "waiting for a source on unix:" || fail "status text"
	"$GODWIT" quit --api "$T/dst.sock" || fail "quit"
	wait "$DST_PID"; rc=$?
	[ "$rc" = 0 ] || fail "idle destination exited $rc on quit"
	grep -q "no migration received" "$T/dst.log" && ! grep -q " ERROR " "$T/dst.log" || fail "quit log"
	# --incoming defer, never told where: the same.
	"$GODWIT" run --incoming defer --api "$T/d2.sock" 2>"$T/d2.log" & p=$!; PIDS+=("$p")
	wait_for "$T/d2.sock" "d['vm-status'] == 'incoming'"
	kill -TERM "$p"; wait "$p"; rc=$?
	[ "$rc" = 0 ] && grep -q "no migration received" "$T/d2.log" || fail "deferred idle exit $rc"
	pass "an idle destination exits 0: no migration received"
	;;
progress)
	start_dst unix:"$T/mig.sock"
	start_src --memory 256M --fill mix --workload dirty:ws=32M,pattern=page,rate=20000
	# round 0 one whole pass (round-max-ms=0) of ~200 MB at most 200 MB/s: it
	# lasts at least a second on any machine, so it spans several samples
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --max-bandwidth 200M --progress=always \
		--set round-max-ms=0 --timeline "$T/t.csv" >"$T/m.out" 2>"$T/m.err" || fail "migration failed: $(cat "$T/m.err")"
	grep -q "^progress: active round 0: [0-9.]*%, .* left, .* sent, link .*ETA " "$T/m.err" ||
		fail "no progress line of round 0: $(cat "$T/m.err")"
	grep -q "^source vm: *postmigrate" "$T/m.out" || fail "report read too early: $(cat "$T/m.out")"
	python3 - "$T/t.csv" "$T/m.err" <<'EOF' || fail "timeline: $(head -20 "$T/t.csv")"
import csv, re, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith('#'))]
samples = [r for r in rows if r['kind'] == 'sample']
rounds = [r for r in rows if r['kind'] == 'round']
assert len(samples) >= 3 and rounds, (len(samples), len(rounds))
assert [int(r['round']) for r in rounds] == list(range(len(rounds)))
# remaining falls during round 0 (pages sent go off it), and ends at 0
r0 = [int(r['remaining_bytes']) for r in samples if r['phase'] == 'active' and r['round'] == '0']
assert len(r0) >= 2 and r0[-1] < r0[0], r0
assert int(samples[-1]['remaining_bytes']) == 0
t = [float(r['time_ms']) for r in samples]
assert t == sorted(t)
# percent in the progress lines never goes backwards within round 0
pct = [float(m.group(1)) for m in re.finditer(r'active round 0: ([0-9.]+)%', open(sys.argv[2]).read())]
assert pct == sorted(pct), pct
EOF
	pass "progress lines, timeline samples and rounds, remaining falls in round 0"
	;;
defer)
	"$GODWIT" run --incoming defer --api "$T/dst.sock" >"$T/dst.out" 2>"$T/dst.log" & DST_PID=$!; PIDS+=("$DST_PID")
	start_src --memory 64M --fill mix --workload verify:rate=5000
	wait_for "$T/dst.sock" "d['vm-status'] == 'incoming'"
	"$GODWIT" migrate --api "$T/dst.sock" --to unix:"$T/x" 2>/dev/null && fail "a deferred destination migrated out"
	"$GODWIT" migrate --api "$T/dst.sock" --incoming unix:"$T/mig.sock" >"$T/inc.out" || fail "incoming"
	grep -qx "incoming unix:$T/mig.sock" "$T/inc.out" || fail "incoming said $(cat "$T/inc.out")"
	grep -qx "incoming unix:$T/mig.sock" "$T/dst.out" || fail "run did not print the URL"
	"$GODWIT" migrate --api "$T/dst.sock" --incoming unix:"$T/mig2.sock" 2>"$T/e" && fail "second incoming"
	grep -q "already been started" "$T/e" || fail "second incoming: $(cat "$T/e")"
	"$GODWIT" migrate --api "$T/src.sock" --to unix:"$T/mig.sock" >"$T/m.out" || fail "migration failed"
	wait_for "$T/dst.sock" "d['status'] == 'completed' and d['vm-status'] == 'running'"
	"$GODWIT" check --api "$T/dst.sock" >/dev/null || fail "destination check"
	pass "--incoming defer, then migrate --incoming URL, then a migration"
	;;
failure)
	start_dst unix:"$T/mig.sock" --memory 32M
	start_src --memory 64M --fill mix
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" >"$T/m.out" 2>"$T/m.err" && fail "layout mismatch migrated"
	grep -q "^status: *failed" "$T/m.out" || fail "report: $(cat "$T/m.out")"
	grep -q "^error: .*(phase [a-z]*)" "$T/m.out" || fail "no reason and phase: $(cat "$T/m.out")"
	grep -Eq "^(throughput|pages|compression|dirty tracking|convergence|cpu \(source\)):" "$T/m.out" &&
		fail "a block of zeros in a failure report: $(cat "$T/m.out")"
	grep -q "^source vm: *running" "$T/m.out" || fail "source vm: $(cat "$T/m.out")"
	pass "a failure report: reason, phase, no zeros"
	;;
*)
	fail "unknown case $case"
	;;
esac
