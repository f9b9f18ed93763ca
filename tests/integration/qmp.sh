#!/bin/bash
# Invariant: godwit's QMP socket speaks QEMU's protocol to a client godwit did
# not write: socat plays a recorded session (qmp/session.jsonl, one QMP
# message per line) and godwit answers as QEMU would (negotiation, errors
# with QEMU's classes, QEMU's parameter names and units read back,
# capabilities, stop/cont, the refusals of the commands libvirt's flow adds:
# migrate-continue in the wrong state, unknown objects, getfd without an fd,
# fd: URIs, postcopy recovery with none paused); a migration is
# driven from QMP alone (migrate-incoming on a destination started with
# --incoming defer, migrate on the source) with MIGRATION and
# MIGRATION_PASS events, and ends with the source postmigrate.
# Case "qemu": the same session played against qemu-system-x86_64 -qmp
# gives replies of the same shape for every command both have
# (qmp/compare.py); skipped (77) when QEMU is not installed.
# Case "cli": godwit migrate --qmp and godwit status --qmp say only what QMP
# tells: the source's state it stays in (postmigrate, not the paused moment
# before), the downtime as query-migrate gives it (no estimate godwit did not
# make, no expected downtime QMP no longer gives), no accelerator QMP does
# not name, and a destination whose VM runs has completed, with no rounds.
# Usage: qmp.sh godwit|qemu|cli. Waits are bounded (a hang fails), never timed.
. "$(dirname "$0")/lib.sh"
case=$1
Q_DIR=$(dirname "$0")/qmp
command -v socat >/dev/null || skip "socat is not installed (scripts/deps.sh test)"

# qmp_play SOCK SCRIPT OUT: play SCRIPT on SOCK with socat, one line at a
# time, each answered before the next goes; OUT gets {"n","cmd","reply"}
# per command and $OUT.events the events. The connection stays open
# (coprocess QP) for qmp_wait_event; qmp_close ends it.
qmp_play() {
	local sock=$1 script=$2 out=$3 line msg n=0
	: >"$out"; : >"$out.events"
	coproc QP { socat - UNIX-CONNECT:"$sock"; }
	read -r -t 30 -u "${QP[0]}" msg || fail "no QMP greeting on $sock"
	printf '%s\n' "$msg" >"$out.greeting"
	while IFS= read -r line; do
		line=${line//@URI@/${URI:-}}
		printf '%s\n' "$line" >&"${QP[1]}"
		while :; do
			read -r -t 30 -u "${QP[0]}" msg || fail "no answer to #$n $line"
			msg=${msg%$'\r'}
			case $msg in
			*'"event"'*) printf '%s\n' "$msg" >>"$out.events" ;;
			*) python3 -c 'import json,sys; print(json.dumps({"n": int(sys.argv[1]), "cmd": sys.argv[2], "reply": json.loads(sys.argv[3])}))' \
				"$n" "$line" "$msg" >>"$out" || fail "not JSON: $msg"
			   break ;;
			esac
		done
		n=$((n + 1))
	done <"$script"
}
# qmp_wait_event OUT EVENT STATUS: read events until EVENT with data.status STATUS.
qmp_wait_event() {
	local msg
	while read -r -t 60 -u "${QP[0]}" msg; do
		printf '%s\n' "${msg%$'\r'}" >>"$1.events"
		case $msg in *"\"$2\""*"\"$3\""*) return 0 ;; esac
	done
	fail "no $2 $3 event: $(cat "$1.events")"
}
qmp_close() { exec {QP[1]}>&-; wait "$QP_PID" 2>/dev/null; }
# reply OUT ID: the reply to the command with that id.
reply() { python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["reply"].get("id") == sys.argv[2]: print(json.dumps(r["reply"])); break' "$1" "$2"; }

case $case in
godwit)
	"$GODWIT" run --memory 64M --fill mix --workload verify:rate=5000 --qmp "$T/src.qmp" \
		--api "$T/src.sock" >"$T/src.out" 2>"$T/src.log" &
	PIDS+=($!)
	for _ in $(seq 1 100); do [ -S "$T/src.qmp" ] && break; sleep 0.1; done
	qmp_play "$T/src.qmp" "$Q_DIR/session.jsonl" "$T/g.jsonl"
	qmp_close
	python3 - "$T/g.jsonl" "$T/g.jsonl.greeting" <<'PY' || fail "godwit's QMP replies: $(cat "$T/g.jsonl")"
import json, sys
R = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    R[r['reply'].get('id', '#%d' % r['n'])] = r['reply']
g = json.load(open(sys.argv[2]))
assert set(g['QMP']) == {'version', 'capabilities'} and g['QMP']['version']['package'].startswith('godwit')
def err(i, cls): assert R[i]['error']['class'] == cls, (i, R[i])
err('before-negotiation', 'CommandNotFound')
err('twice', 'CommandNotFound')
err('bad-command', 'CommandNotFound')
for i in ('bad-type', 'bad-name', 'bad-cap', 'bad-argument', 'no-execute', 'postcopy',
          'incoming-on-source', 'continue-none', 'continue-no-state', 'object-bad-type',
          'object-no-dir', 'object-del-none', 'getfd-none', 'closefd-none', 'migrate-fd',
          'recover-on-source', 'pause-none', 'godwit-only:creds-none', 'godwit-only:verify-peer-off'):
    err(i, 'GenericError')
assert 'Enable postcopy' in R['postcopy']['error']['desc'], R['postcopy']
assert R['godwit-only:postcopy-cap']['return'] == {}
assert 'fd:' in R['migrate-fd']['error']['desc'] and 'SCM_RIGHTS' in R['getfd-none']['error']['desc']
assert R['params']['return']['tls-creds'] == '' and 'blocked-reasons' not in R['migrate-none']['return']
assert R['migrate-none']['return'] == {}
p = R['params-after']['return']
assert p['downtime-limit'] == 150 and p['max-bandwidth'] == 268435456, p
assert p['xbzrle-cache-size'] == 33554432 and p['multifd-channels'] == 3, p
caps = {c['capability']: c['state'] for c in R['caps-after']['return']}
assert caps['events'] and caps['xbzrle'] and not caps['multifd'] and not caps['postcopy-ram'], caps
assert R['status-paused']['return']['status'] == 'paused' and not R['status-paused']['return']['running']
assert R['status-running']['return']['status'] == 'running'
names = {c['name'] for c in R['godwit-only:commands']['return']}
for c in ('query-migrate', 'migrate', 'migrate_cancel', 'migrate-set-parameters', 'query-migrate-parameters',
          'migrate-set-capabilities', 'query-migrate-capabilities', 'migrate-incoming',
          'migrate-start-postcopy', 'query-status', 'stop', 'cont', 'quit', 'migrate-continue',
          'migrate-recover', 'migrate-pause', 'object-add', 'object-del', 'getfd', 'closefd'):
    assert c in names, c
PY
	grep -q '"event":"STOP"' "$T/g.jsonl.events" && grep -q '"event":"RESUME"' "$T/g.jsonl.events" ||
		fail "no STOP/RESUME events: $(cat "$T/g.jsonl.events")"
	# What QMP set, the godwit API reads back in godwit's names and units.
	"$GODWIT" params --api "$T/src.sock" --json >"$T/p.json" || fail "params --api"
	jget "$T/p.json" "d['parameters']['downtime-limit-us']['value'] == 150000 and d['parameters']['xbzrle-cache-bytes']['value'] == 33554432" |
		grep -qx True || fail "API readback: $(cat "$T/p.json")"
	# A migration from QMP alone: a deferred destination told where to listen, events.
	"$GODWIT" run --incoming defer --qmp "$T/dst.qmp" --api "$T/dst.sock" >"$T/dst.out" 2>"$T/dst.log" &
	DST_PID=$!; PIDS+=($DST_PID)
	for _ in $(seq 1 100); do [ -S "$T/dst.qmp" ] && break; sleep 0.1; done
	printf '%s\n' '{"execute":"qmp_capabilities"}' \
		"{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":\"unix:$T/mig.sock\"},\"id\":\"in\"}" \
		'{"execute":"query-migrate","id":"q"}' >"$T/dst.script"
	qmp_play "$T/dst.qmp" "$T/dst.script" "$T/d.jsonl"
	qmp_close
	reply "$T/d.jsonl" q | grep -q "\"path\": \"$T/mig.sock\"" || fail "destination socket-address: $(cat "$T/d.jsonl")"
	URI=unix:$T/mig.sock
	qmp_play "$T/src.qmp" "$Q_DIR/migrate.jsonl" "$T/m.jsonl"
	reply "$T/m.jsonl" migrate | grep -q '"return": {}' || fail "migrate: $(cat "$T/m.jsonl")"
	qmp_wait_event "$T/m.jsonl" MIGRATION completed
	printf '%s\n' '{"execute":"qmp_capabilities"}' '{"execute":"query-migrate","id":"end"}' \
		'{"execute":"query-status","id":"st"}' >"$T/end.script"
	qmp_close
	qmp_play "$T/src.qmp" "$T/end.script" "$T/e.jsonl"
	qmp_close
	python3 - "$T/m.jsonl.events" "$T/e.jsonl" <<'PY' || fail "migration over QMP: $(cat "$T/m.jsonl.events" "$T/e.jsonl")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
mig = [e['data']['status'] for e in ev if e['event'] == 'MIGRATION']
passes = [e['data']['pass'] for e in ev if e['event'] == 'MIGRATION_PASS']
assert mig[0] == 'setup' and 'active' in mig and mig[-1] == 'completed', mig
assert passes == list(range(1, len(passes) + 1)) and len(passes) >= 2, passes
assert all(set(e['timestamp']) == {'seconds', 'microseconds'} for e in ev)
R = {json.loads(l)['reply'].get('id'): json.loads(l)['reply'] for l in open(sys.argv[2])}
m = R['end']['return']
assert m['status'] == 'completed' and m['ram']['total'] == 64 << 20 and m['ram']['remaining'] == 0, m
assert isinstance(m['downtime'], int) and isinstance(m['total-time'], int)
assert R['st']['return']['status'] == 'postmigrate', R['st']
PY
	for _ in $(seq 1 100); do
		[ "$("$GODWIT" status --api "$T/dst.sock" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["vm-status"])')" = running ] && break
		sleep 0.1
	done
	"$GODWIT" check --api "$T/dst.sock" >/dev/null || fail "destination check after a QMP migration"
	# godwit status --qmp reads QMP back into godwit's report.
	"$GODWIT" status --qmp "$T/src.qmp" | grep -q "^status: *completed" || fail "status --qmp"
	pass "QMP session, parameters, capabilities and a migration with events"
	;;
cli)
	start_dst "unix:$T/mig.sock" --memory 64M --qmp "$T/dst.qmp"
	start_src --memory 64M --fill mix --workload verify:rate=1000 --qmp "$T/src.qmp"
	"$GODWIT" migrate --qmp "$T/src.qmp" --to "$DST_URL" --progress never >"$T/mig.txt" 2>"$T/mig.err" ||
		fail "migrate --qmp exit $?: $(cat "$T/mig.err" "$T/mig.txt")"
	grep -q '^source vm: *postmigrate$' "$T/mig.txt" || fail "source vm: $(cat "$T/mig.txt")"
	grep -q '^downtime: .*(as query-migrate gives it)$' "$T/mig.txt" || fail "downtime line: $(cat "$T/mig.txt")"
	grep -q 'RESUMED minus RTT\|expected 0.000' "$T/mig.txt" && fail "said what QMP did not: $(cat "$T/mig.txt")"
	for _ in $(seq 1 100); do
		[ "$("$GODWIT" status --api "$T/dst.sock" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["vm-status"])')" = running ] && break
		sleep 0.1
	done
	"$GODWIT" status --qmp "$T/dst.qmp" >"$T/dst.txt" || fail "status --qmp on the destination"
	grep -q '^vm-status: *running (destination)$' "$T/dst.txt" || fail "destination vm-status: $(cat "$T/dst.txt")"
	grep -q '^status: *completed (destination)$' "$T/dst.txt" || fail "destination status: $(cat "$T/dst.txt")"
	grep -q 'accel ?\|round 0\|ETA' "$T/dst.txt" && fail "destination said what QMP did not: $(cat "$T/dst.txt")"
	"$GODWIT" status --qmp "$T/src.qmp" | grep -q '^vm-status: *postmigrate (source)$' || fail "source status --qmp"
	pass "migrate --qmp and status --qmp: postmigrate, QMP's downtime, a running destination completed"
	;;
qemu)
	QEMU=$(command -v qemu-system-x86_64) || skip "qemu-system-x86_64 is not installed (Debian's qemu-system-x86)"
	"$QEMU" -M none -nodefaults -display none -qmp "unix:$T/qemu.qmp,server=on,wait=off" \
		>"$T/qemu.log" 2>&1 &
	PIDS+=($!)
	"$GODWIT" run --memory 32M --qmp "$T/src.qmp" >"$T/src.out" 2>"$T/src.log" &
	PIDS+=($!)
	for _ in $(seq 1 200); do [ -S "$T/src.qmp" ] && [ -S "$T/qemu.qmp" ] && break; sleep 0.1; done
	[ -S "$T/qemu.qmp" ] || fail "QEMU did not listen: $(cat "$T/qemu.log")"
	qmp_play "$T/src.qmp" "$Q_DIR/session.jsonl" "$T/g.jsonl"; qmp_close
	qmp_play "$T/qemu.qmp" "$Q_DIR/session.jsonl" "$T/q.jsonl"; qmp_close
	python3 "$Q_DIR/compare.py" "$T/g.jsonl" "$T/q.jsonl" >"$T/cmp.txt" 2>&1 ||
		fail "replies differ from QEMU's: $(cat "$T/cmp.txt")"
	cat "$T/cmp.txt"
	pass "godwit's QMP replies have QEMU's shapes ($("$QEMU" --version | head -1))"
	;;
*) fail "unknown case $case" ;;
esac
