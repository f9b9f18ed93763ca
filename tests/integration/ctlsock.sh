#!/bin/bash
# Invariant: no local client of the control sockets can exhaust the
# process's descriptors, stall its API or QMP, or make its start-up or exit
# harm a path (docs/security.md).
#   events-leak  under ulimit -n 40, 300 `events` streams opened and closed on
#                an idle destination leave no descriptor behind; streams
#                opened until the limit (plus pending migration connections)
#                make neither the API thread nor the acceptor spin (CPU over
#                2 s well under a core); once released, status answers and a
#                real migration to that destination completes and verifies.
#   api-drip     a client dripping a request a byte at a time: status answers
#                after each of its drips while it stays connected, and the
#                dripper is cut by the request bound (at most 40 drips).
#   qmp-silent   12 silent QMP clients (more than the 8 slots): a client
#                still negotiates, migrate_cancel answers and quit ends the VM
#                (exit 0); the idlest silent clients were told they were
#                evicted, and the others that they did not negotiate in time.
#   qmp-hog      a QMP client that sends commands and never reads the answers:
#                the server stops reading it rather than wait on its full
#                socket, another client is served meanwhile, and the hog,
#                reading at last, gets every answer (it was not dropped).
#   unix-paths   --api, --qmp and --incoming unix:PATH on a path held by a
#                listener that never accepts (backlog full) each refuse at
#                once, with a reason, and leave the path alone; a
#                destination whose migration socket file was replaced by a
#                plain file leaves that file at exit.
# Counts and time are bounded; timing never decides a pass (the CPU check
# compares against a spinner's full core with a margin of 4x).
# Usage: ctlsock.sh CASE
. "$(dirname "$0")/lib.sh"
case=$1
py() { python3 -c "$1" "${@:2}"; }
fds() { ls "/proc/$1/fd" | wc -l; }

case $case in
events-leak)
	(ulimit -n 40; start_dst "tcp:127.0.0.1:0" --memory 64M; echo "$DST_PID" >"$T/dst.pid"; echo "$DST_URL" >"$T/dst.url")
	DST_PID=$(cat "$T/dst.pid"); DST_URL=$(cat "$T/dst.url"); PIDS+=("$DST_PID")
	for _ in $(seq 1 100); do "$GODWIT" status --api "$T/dst.sock" >/dev/null 2>&1 && break; sleep 0.1; done
	base=$(fds "$DST_PID")
	py "
import socket
for i in range(300):
    s = socket.socket(socket.AF_UNIX); s.connect('$T/dst.sock'); s.sendall(b'events\n')
    assert b'\"ok\":true' in s.recv(200), 'stream %d not answered' % i
    s.close()" || fail "events streams"
	for _ in $(seq 1 100); do [ "$(fds "$DST_PID")" -le $((base + 2)) ] && break; sleep 0.1; done
	n=$(fds "$DST_PID"); [ "$n" -le $((base + 2)) ] || fail "300 closed streams left $n descriptors (base $base)"
	port=${DST_URL##*:}
	out=$(py "
import os, socket, sys, time
pid, port = sys.argv[1], int(sys.argv[2])
def cpu_s():
    f = open('/proc/%s/stat' % pid).read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
held = []
for i in range(60):
    s = socket.socket(socket.AF_UNIX); s.settimeout(0.5); held.append(s)
    try:
        s.connect('$T/dst.sock'); s.sendall(b'events\n'); s.recv(200)
    except OSError:
        pass
for i in range(3):
    held.append(socket.create_connection(('127.0.0.1', port)))
c0 = cpu_s(); time.sleep(2); c1 = cpu_s()
print('%d %.2f' % (len(os.listdir('/proc/%s/fd' % pid)), c1 - c0))
for s in held: s.close()" "$DST_PID" "$port") || fail "exhausting"
	set -- $out
	[ "$1" -ge 38 ] || fail "the limit was not reached ($1 descriptors)"
	py "import sys; sys.exit(0 if float(sys.argv[1]) < 0.5 else 1)" "$2" || fail "at the descriptor limit the process used $2 s of CPU in 2 s (spinning)"
	for _ in $(seq 1 100); do [ "$(fds "$DST_PID")" -le $((base + 2)) ] && break; sleep 0.1; done
	"$GODWIT" status --api "$T/dst.sock" >/dev/null || fail "status after the limit"
	start_src --memory 64M --fill mix --workload verify:rate=2000
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --json >"$T/mig.json" 2>"$T/mig.err" || fail "migration: $(cat "$T/mig.err")"
	[ "$(jget "$T/mig.json" "d['status']")" = completed ] && [ "$(jget "$T/mig.json" "d['verify']")" = ok ] ||
		fail "migration after the limit: $(cat "$T/mig.err")"
	pass "events-leak: 300 streams left $n descriptors (base $base); at the limit ($1) $2 s CPU in 2 s; then a migration completed" ;;
api-drip)
	start_src --memory 32M
	out=$(py "
import socket, subprocess, sys, time
d = socket.socket(socket.AF_UNIX); d.connect('$T/src.sock'); d.settimeout(0.5)
for i in range(40):
    try:
        d.send(b'statu'[i % 5:i % 5 + 1])
    except OSError:
        break
    if i < 3:
        r = subprocess.run(['$GODWIT', 'status', '--api', '$T/src.sock', '--json'], capture_output=True, timeout=30)
        if r.returncode != 0: print('status failed while dripping'); sys.exit(1)
    try:
        got = d.recv(200)
        print('cut after %d drips: %s' % (i + 1, got.decode(errors='replace').strip())); sys.exit(0)
    except socket.timeout:
        pass
print('never cut'); sys.exit(1)") || fail "drip: $out"
	case $out in *"no complete request"*) ;; *) fail "the dripper was not told why: $out" ;; esac
	pass "api-drip: status answered beside a dripping client, $out" ;;
qmp-silent)
	"$GODWIT" run --memory 32M --qmp "$T/q.sock" >"$T/run.out" 2>"$T/run.log" &
	RUN_PID=$!; PIDS+=("$RUN_PID")
	for _ in $(seq 1 100); do [ -S "$T/q.sock" ] && break; sleep 0.1; done
	out=$(py "
import json, socket
def conn():
    s = socket.socket(socket.AF_UNIX); s.connect('$T/q.sock'); s.settimeout(20)
    f = s.makefile('rb'); json.loads(f.readline()); return s, f
silent = [conn() for i in range(12)]
s, f = conn()
def ask(cmd):
    s.sendall(json.dumps({'execute': cmd}).encode() + b'\n')
    while True:
        m = json.loads(f.readline())
        if 'event' not in m: return m
assert 'return' in ask('qmp_capabilities')
ask('migrate_cancel')
r = ask('query-status'); assert 'return' in r, r
evicted = 0
for c, cf in silent[:4]:
    line = cf.readline()
    evicted += b'evicted' in line
print(evicted)
c, cf = silent[-1]
assert b'no qmp_capabilities in time' in cf.readline(), 'a silent client outlived the negotiation bound'
assert 'return' in ask('quit')") || fail "QMP beside silent clients: $out"
	[ "$out" -ge 1 ] || fail "no silent client was told it was evicted"
	for _ in $(seq 1 100); do kill -0 "$RUN_PID" 2>/dev/null || break; sleep 0.1; done
	wait "$RUN_PID"; rc=$?
	[ "$rc" = 0 ] || fail "quit through QMP beside 12 silent clients: exit $rc"
	pass "qmp-silent: 12 silent clients, $out of the 4 oldest told they were evicted, migrate_cancel and quit served, the last silent one cut at the negotiation bound" ;;
qmp-hog)
	"$GODWIT" run --memory 32M --qmp "$T/q.sock" >"$T/run.out" 2>"$T/run.log" &
	RUN_PID=$!; PIDS+=("$RUN_PID")
	for _ in $(seq 1 100); do [ -S "$T/q.sock" ] && break; sleep 0.1; done
	out=$(py "
import json, socket
def conn():
    s = socket.socket(socket.AF_UNIX); s.connect('$T/q.sock'); s.settimeout(20)
    f = s.makefile('rb'); json.loads(f.readline())
    s.sendall(b'{\"execute\":\"qmp_capabilities\"}\n'); assert 'return' in json.loads(f.readline())
    return s, f
hog, hf = conn()
hog.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096); hog.settimeout(1.0)
cmd = b'{\"execute\":\"query-status\"}\n'; sent = 0
for i in range(100000):
    try:
        n = hog.send(cmd)
    except socket.timeout:
        break
    if n != len(cmd): break
    sent += 1
assert sent < 100000, 'the server kept reading a client that reads nothing'
s, f = conn()
s.sendall(b'{\"execute\":\"query-status\"}\n'); assert 'return' in json.loads(f.readline())
hog.settimeout(20); got = 0
while got < sent:
    line = hf.readline()
    if not line: break
    m = json.loads(line)
    got += 'return' in m
print('%d %d' % (sent, got))
s.sendall(b'{\"execute\":\"quit\"}\n')") || fail "QMP beside a client that reads nothing: $out"
	set -- $out
	[ "$2" -ge "$1" ] || fail "the hog got $2 answers of $1: dropped"
	pass "qmp-hog: $1 commands never read; another client served meanwhile; the hog then got all $2 answers" ;;
unix-paths)
	python3 -c "
import os, socket, sys, time
l = socket.socket(socket.AF_UNIX); l.bind('$T/held.sock'); l.listen(0)
c = []
for i in range(4):
    s = socket.socket(socket.AF_UNIX); s.setblocking(False); c.append(s)
    try: s.connect('$T/held.sock')
    except OSError: pass
open('$T/held.ready', 'w').close()
time.sleep(120)" &
	PIDS+=("$!")
	for _ in $(seq 1 100); do [ -e "$T/held.ready" ] && break; sleep 0.1; done
	for opt in "--api $T/held.sock" "--qmp $T/held.sock" "--incoming unix:$T/held.sock"; do
		# shellcheck disable=SC2086  # $opt is an option and its value
		timeout -k 2 30 "$GODWIT" run --memory 32M $opt >"$T/held.out" 2>"$T/held.log"; rc=$?
		[ "$rc" != 124 ] || fail "$opt on a held path hung"
		[ "$rc" != 0 ] || fail "$opt on a held path started"
		grep -q "in use" "$T/held.log" || fail "$opt: no reason: $(tail -n 3 "$T/held.log")"
		[ -S "$T/held.sock" ] || fail "$opt removed the held socket"
	done
	start_dst "unix:$T/mig.sock" --memory 32M
	rm "$T/mig.sock" && echo precious >"$T/mig.sock"
	"$GODWIT" quit --api "$T/dst.sock" || fail "quit"
	for _ in $(seq 1 100); do kill -0 "$DST_PID" 2>/dev/null || break; sleep 0.1; done
	[ "$(cat "$T/mig.sock" 2>/dev/null)" = precious ] || fail "the destination removed the file that replaced its socket"
	[ -e "$T/dst.sock" ] && fail "the API socket was left behind"
	pass "unix-paths: --api, --qmp, --incoming refuse a held path with a reason; a replacing file survives exit" ;;
*) fail "case $case" ;;
esac
