#!/bin/bash
# Invariant: no stranger can stop, stall or take over a destination, and
# local sockets are private.
#   strangers   while a real migration runs, 70 idle connections (more than
#               the 64 silent openings), a client dripping a HELLO a byte at
#               a time and one sending garbage are all refused on their own
#               connections; the migration completes and is verified.
#   evict       4 runs, each a fresh destination: 40 connections parked in
#               their first frame (a HELLO header announcing 3652 bytes, 3600
#               sent; more than the 32 first-frame openings), reconnecting
#               when closed, and 800 silent connections a second
#               (bench/parked.py --attack parked-churn); every run's
#               migration completes and is verified, and the parked peers
#               evicted were told why (an ERROR naming the eviction).
#   evict-tls   the same with mutual TLS against 200 idle connections that
#               reconnect when closed (--attack reconnect): 4 of 4 complete.
#   busy        a second source while a migration runs gets ERROR BUSY at
#               once, naming who holds the destination; the first completes.
#   stalled     a committed migration whose source stops (SIGSTOP) times
#               out on the destination (no page on any connection for
#               io-timeout-ms), which never resumes; the source, continued,
#               keeps running its VM.
#   tls         through the binary: a plain source to a TLS destination is
#               refused (both say why) and the destination keeps waiting;
#               then a source with the right certificate migrates
#               (--tls-authz names it); then PSK.
#   tls-certs   the README's TLS example: `godwit tls-certs DIR --host
#               127.0.0.1 --client-name NAME` makes credentials both ends
#               migrate with (--tls-authz NAME, the peers' names as made);
#               a second run into the same DIR is refused (exit 1, nothing
#               replaced), a bad --host or no DIR is a usage error (exit 2).
#   sockets     the unix: migration socket and the API socket are 0600 under
#               umask 000; --incoming unix:PATH does not replace a file that
#               is not a socket; a connection from another user is refused by
#               the API (SO_PEERCRED).
# Timing never decides: workloads write at a fixed low rate, links are capped.
# Usage: admission.sh CASE
. "$(dirname "$0")/lib.sh"
case=$1
migrate() { "$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --json "$@" >"$T/mig.json" 2>"$T/mig.err"; }
check_completed() {
	[ "$(jget "$T/mig.json" "d['status']")" = completed ] || fail "status $(jget "$T/mig.json" "d['status']"): $(cat "$T/mig.err")"
	[ "$(jget "$T/mig.json" "d['verify']")" = ok ] || fail "verify $(jget "$T/mig.json" "d['verify']")"
}
# py CODE: a small client in Python (sockets only).
py() { python3 -c "$1"; }
PARKED=$(dirname "$0")/../../bench/parked.py
# attack_runs KIND RUNS "SRC ARGS" [DST ARGS...]: RUNS times a fresh
# destination and source, the attack KIND against the destination's port
# (bounded: bench/parked.py), one migration that must complete and verify.
attack_runs() {
	local kind=$1 runs=$2 src_args=$3 apid r
	shift 3
	for r in $(seq 1 "$runs"); do
		rm -f "$T"/*.sock "$T/attack.ready"
		start_dst tcp:127.0.0.1:0 "$@"
		start_src --memory 64M --fill mix --workload verify:rate=2000
		python3 "$PARKED" --attack "$kind" --port "${DST_URL##*:}" --seconds 120 \
			--ready "$T/attack.ready" >"$T/attack.out" 2>&1 &
		apid=$!
		PIDS+=("$apid")
		for _ in $(seq 1 200); do [ -f "$T/attack.ready" ] && break; sleep 0.05; done
		[ -f "$T/attack.ready" ] || fail "run $r: the attack did not start: $(cat "$T/attack.out")"
		# shellcheck disable=SC2086  # the source's arguments split on purpose
		migrate $src_args || fail "run $r beside $kind: migrate exit $?: $(tail -n 3 "$T/mig.err")"
		check_completed
		kill "$apid"
		wait "$apid" 2>/dev/null
		grep -q conn_evicted "$T/dst.log" || fail "run $r: nothing evicted: $(cat "$T/attack.out")"
		echo "run $r: completed, setup $(jget "$T/mig.json" "'%.1f ms' % d['setup-time']"); $(cat "$T/attack.out")"
		cat "$T/attack.out" >>"$T/attack.all"
		"$GODWIT" quit --api "$T/dst.sock" >/dev/null 2>&1
		"$GODWIT" quit --api "$T/src.sock" >/dev/null 2>&1
		wait "$DST_PID" "$SRC_PID" 2>/dev/null
	done
}

case $case in
strangers)
	start_dst tcp:127.0.0.1:0 --set io-timeout-ms=3000
	port=${DST_URL##*:}
	start_src --memory 256M --fill mix --workload verify:rate=2000
	# 70 idle connections, a dripper and a garbage sender, held open meanwhile.
	py "
import socket, time, os, sys
socks = [socket.create_connection(('127.0.0.1', $port)) for _ in range(70)]
g = socket.create_connection(('127.0.0.1', $port)); g.sendall(b'GET / HTTP/1.1\r\n\r\n')
d = socket.create_connection(('127.0.0.1', $port))
open('$T/strangers.ready', 'w').close()
for b in b'GWM1' + bytes(20):
    try: d.send(bytes([b]))
    except OSError: break
    time.sleep(0.5)
time.sleep(2)
" &
	pyp=$!
	for _ in $(seq 1 100); do [ -f "$T/strangers.ready" ] && break; sleep 0.05; done
	migrate --max-bandwidth 64M || fail "migrate exit $?: $(tail -n 3 "$T/mig.err")"
	check_completed
	wait "$pyp"
	grep -q "conn_evicted" "$T/dst.log" || fail "no eviction with 70 idle connections"
	grep -q "no complete first frame within 3000 ms\|closed before" "$T/dst.log" || fail "dripper not refused"
	grep -q "not a godwit frame" "$T/dst.log" || fail "garbage not refused"
	pass "strangers: migration completed beside 72 strangers; setup $(jget "$T/mig.json" "'%.1f ms' % d['setup-time']"), refused $(grep -c 'conn_refused\|conn_evicted' "$T/dst.log") lines" ;;
evict)
	attack_runs parked-churn 4 "" --set io-timeout-ms=10000
	# Every run evicts parked peers (40 of them for 32 first-frame openings): each must read why.
	n=$(sed -n 's/.*evicted-errors parked \([0-9]*\),.*/\1/p' "$T/attack.all" | awk '$1 > 0' | wc -l)
	[ "$n" = 4 ] || fail "parked peers evicted without an ERROR saying so: $(cat "$T/attack.all")"
	pass "evict: 4 of 4 migrations completed beside 40 parked and 800/s silent connections; evicted peers told why in 4 of 4" ;;
evict-tls)
	certs=$T/certs
	"$(dirname "$0")/../tls/gen-certs.sh" "$certs" >/dev/null 2>&1 || skip "cannot make certificates (openssl)"
	attack_runs reconnect 4 "--tls-creds $certs/src-ok" --set io-timeout-ms=10000 --tls-creds "$certs/dst-ok"
	pass "evict-tls: 4 of 4 TLS migrations completed beside 200 idle connections reconnecting when closed" ;;
busy)
	start_dst tcp:127.0.0.1:0
	start_src --memory 256M --fill mix --workload verify:rate=2000
	# A second source: its own VM and API.
	GW_FAULT= "$GODWIT" run --api "$T/src2.sock" --memory 64M --workload idle >"$T/src2.out" 2>"$T/src2.log" &
	PIDS+=("$!")
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --max-bandwidth 24M --detach >/dev/null || fail "first migrate"
	for _ in $(seq 1 200); do
		src_status
		[ "$(jget "$T/src.json" "d.get('status')")" = active ] && break
		sleep 0.05
	done
	for _ in $(seq 1 100); do "$GODWIT" status --api "$T/src2.sock" >/dev/null 2>&1 && break; sleep 0.1; done
	"$GODWIT" migrate --api "$T/src2.sock" --to "$DST_URL" --json >"$T/mig2.json" 2>"$T/mig2.err" &&
		fail "the second source migrated"
	"$GODWIT" status --api "$T/src2.sock" --json >"$T/st2.json" || fail "second source gone"
	reason=$(jget "$T/st2.json" "d.get('error-desc', '')")
	case $reason in *busy*127.0.0.1*) ;; *) fail "second source was told '$reason'" ;; esac
	[ "$(jget "$T/st2.json" "d.get('vm-status')")" = running ] || fail "second source VM not running"
	grep -q "busy_refused" "$T/dst.log" || fail "no busy_refused line"
	for _ in $(seq 1 600); do
		src_status
		case $(jget "$T/src.json" "d.get('status')") in completed|failed|cancelled|unknown) break ;; esac
		sleep 0.1
	done
	[ "$(jget "$T/src.json" "d.get('status')")" = completed ] || fail "first migration: $(cat "$T/src.json")"
	pass "busy: second source told '$reason'; the first completed" ;;
stalled)
	start_dst tcp:127.0.0.1:0 --set io-timeout-ms=1500
	start_src --memory 256M --fill mix --workload verify:rate=2000 --set io-timeout-ms=1500
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --max-bandwidth 16M --detach >/dev/null || fail "migrate"
	for _ in $(seq 1 200); do
		src_status
		[ "$(jget "$T/src.json" "d.get('status')")" = active ] && break
		sleep 0.05
	done
	kill -STOP "$SRC_PID"
	# The destination notices on its own, within io-timeout-ms of silence (bounded wait).
	for _ in $(seq 1 200); do kill -0 "$DST_PID" 2>/dev/null || break; sleep 0.1; done
	kill -CONT "$SRC_PID"
	kill -0 "$DST_PID" 2>/dev/null && fail "destination still waiting for a stopped source"
	grep -q "the migration stalled\|sent nothing within io-timeout-ms" "$T/dst.log" || fail "no stall reason: $(grep ERROR "$T/dst.log" | tail -n 2)"
	grep -q "vm_resume where=destination" "$T/dst.log" && fail "destination resumed a partial VM"
	for _ in $(seq 1 200); do
		src_status
		case $(jget "$T/src.json" "d.get('status')") in failed|cancelled) break ;; esac
		sleep 0.1
	done
	[ "$(jget "$T/src.json" "d.get('status')")" = failed ] || fail "source status $(jget "$T/src.json" "d.get('status')")"
	assert_source_alive_and_consistent
	pass "stalled: destination gave up ($(grep -o 'reason="[^"]*"' "$T/dst.log" | grep -m1 stalled)); the source runs its VM" ;;
tls)
	certs=$T/certs
	"$(dirname "$0")/../tls/gen-certs.sh" "$certs" || skip "cannot make certificates (openssl)"
	start_dst tcp:127.0.0.1:0 --tls-creds "$certs/dst-ok" --tls-authz src.test
	start_src --memory 128M --fill mix --workload verify:rate=2000
	# TLS 1.3 only: a TLS 1.2 client gets no session.
	port=${DST_URL##*:}
	openssl s_client -connect "127.0.0.1:$port" -tls1_2 -cert "$certs/src-ok/client-cert.pem" \
		-key "$certs/src-ok/client-key.pem" </dev/null >"$T/s_client.out" 2>&1 &&
		grep -q "^New, TLSv1.2" "$T/s_client.out" && fail "a TLS 1.2 session was made"
	for _ in $(seq 1 50); do grep -q "tls_refused" "$T/dst.log" && break; sleep 0.1; done
	grep -q "tls_refused" "$T/dst.log" || fail "the TLS 1.2 client was not refused"
	migrate && fail "a plain source migrated to a TLS destination"
	cat "$T/mig.json" "$T/mig.err" | grep -q "requires TLS" || fail "the source did not say why: $(cat "$T/mig.json" "$T/mig.err")"
	grep -q "requires TLS" "$T/dst.log" || fail "the destination did not say why"
	migrate --tls-creds "$certs/src-ok" || fail "TLS migrate exit $?: $(tail -n 3 "$T/mig.err")"
	check_completed
	[ "$(jget "$T/mig.json" "d['tls']['mode']")" = x509 ] || fail "tls $(jget "$T/mig.json" "d['tls']")"
	[ "$(jget "$T/mig.json" "d['tls']['peer']")" = CN=dst.test ] || fail "peer $(jget "$T/mig.json" "d['tls']")"
	grep -q 'tls_handshake conn=control peer="127.0.0.1:[0-9]* CN=src.test"' "$T/dst.log" || fail "destination did not log the source's name"
	"$GODWIT" quit --api "$T/dst.sock" >/dev/null 2>&1
	"$GODWIT" quit --api "$T/src.sock" >/dev/null 2>&1
	wait "$DST_PID" "$SRC_PID" 2>/dev/null
	rm -f "$T"/*.sock
	start_dst tcp:127.0.0.1:0 --tls-psk "$certs/keys.psk"
	start_src --memory 128M --fill mix --workload verify:rate=2000
	migrate --tls-psk "$certs/keys.psk" || fail "PSK migrate exit $?: $(tail -n 3 "$T/mig.err")"
	check_completed
	[ "$(jget "$T/mig.json" "d['tls']['peer']")" = psk:src.test ] || fail "psk peer $(jget "$T/mig.json" "d['tls']")"
	pass "tls: TLS 1.2 and plain refused with reasons, x509 with authz and PSK migrated (kTLS tx $(jget "$T/mig.json" "d['tls']['ktls-tx']"))" ;;
tls-certs)
	command -v openssl >/dev/null || skip "no openssl command"
	certs=$T/tls
	"$GODWIT" tls-certs "$certs" --host 127.0.0.1 --client-name src.example >"$T/certs.out" 2>&1 ||
		fail "tls-certs exit $?: $(cat "$T/certs.out")"
	for f in ca-cert.pem server-cert.pem server-key.pem client-cert.pem client-key.pem; do
		[ -s "$certs/$f" ] || fail "tls-certs made no $f"
	done
	[ -e "$certs/ca-key.pem" ] && fail "the CA's key was left in $certs"
	[ "$(stat -c %a "$certs")" = 700 ] || fail "$certs is mode $(stat -c %a "$certs")"
	sum=$(cat "$certs"/*.pem | md5sum)
	"$GODWIT" tls-certs "$certs" >"$T/again.out" 2>&1
	[ $? -eq 1 ] || fail "a second tls-certs into $certs did not exit 1: $(cat "$T/again.out")"
	grep -q "exists" "$T/again.out" || fail "no reason for refusing $certs: $(cat "$T/again.out")"
	[ "$(cat "$certs"/*.pem | md5sum)" = "$sum" ] || fail "the refused run changed $certs"
	"$GODWIT" tls-certs "$T/bad" --host 'a,DNS:evil' >/dev/null 2>&1
	[ $? -eq 2 ] || fail "--host with a comma was not a usage error"
	"$GODWIT" tls-certs >/dev/null 2>&1
	[ $? -eq 2 ] || fail "tls-certs without DIR was not a usage error"
	start_dst tcp:127.0.0.1:0 --tls-creds "$certs" --tls-authz src.example
	start_src --memory 64M --fill mix --workload verify:rate=2000
	migrate --tls-creds "$certs" || fail "TLS migrate exit $?: $(tail -n 3 "$T/mig.err")"
	check_completed
	[ "$(jget "$T/mig.json" "d['tls']['peer']")" = CN=127.0.0.1 ] || fail "peer $(jget "$T/mig.json" "d['tls']")"
	grep -q 'tls_handshake conn=control peer="127.0.0.1:[0-9]* CN=src.example"' "$T/dst.log" ||
		fail "destination did not log the source's name"
	pass "godwit tls-certs: both ends migrated with its credentials; a second run and bad usage refused" ;;
sockets)
	(umask 000; start_dst "unix:$T/mig.sock"; echo "$DST_PID" >"$T/dst.pid")
	DST_PID=$(cat "$T/dst.pid")
	PIDS+=("$DST_PID")
	for f in mig.sock dst.sock; do
		mode=$(stat -c %a "$T/$f")
		[ "$mode" = 600 ] || fail "$f is mode $mode under umask 000"
	done
	echo "precious" >"$T/file"
	"$GODWIT" run --memory 64M --incoming "unix:$T/file" >"$T/run2.out" 2>"$T/run2.log" && fail "listened over a file"
	grep -q "not a socket" "$T/run2.log" || fail "no reason: $(cat "$T/run2.log")"
	[ "$(cat "$T/file")" = precious ] || fail "the file was replaced"
	if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
		chmod 666 "$T/dst.sock"	# only SO_PEERCRED stands in the way now
		chmod 755 "$T"
		out=$(setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c "
import socket; s = socket.socket(socket.AF_UNIX); s.connect('$T/dst.sock')
try: s.sendall(b'status\n')
except OSError: pass
print(s.recv(4096).decode())" 2>&1)
		case $out in *"permission denied"*) ;; *) fail "another user got: $out" ;; esac
		grep -q "api_refused uid=65534" "$T/dst.log" || fail "no api_refused line"
		"$GODWIT" status --api "$T/dst.sock" >/dev/null || fail "the owner was refused"
		peercred="another uid refused by SO_PEERCRED"
	else
		peercred="SO_PEERCRED not tried (needs root and setpriv)"
	fi
	pass "sockets: 0600 under umask 000, a file is not replaced, $peercred" ;;
*) fail "case $case" ;;
esac
