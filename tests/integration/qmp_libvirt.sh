#!/bin/bash
# Invariant: libvirt's QMP sequence of a p2p migration (virsh migrate --live
# --p2p --parallel --tls --postcopy; qmp/libvirt-p2p.jsonl, with QEMU 7.2's
# replies) drives two godwit processes, source and destination, from QMP
# alone: TLS credentials as QEMU objects, multifd, postcopy-ram and
# pause-before-switchover, migrate-start-postcopy, pre-switchover with the
# VM paused, migrate-continue, completion on both sides; every reply has the
# kind, error class and member types of QEMU's. Cases that abort: a
# migrate_cancel at setup, at active and at pre-switchover, and a
# destination whose credentials come from another CA, each leave the source
# VM running; live-params changes the downtime limit (from 1 ms, which no
# round meets, to 60 s) and the bandwidth of a running migration, which reads
# them back, refuses a setup parameter, and switches over after the change
# (reaching pre-switchover), never before it. Case qemu: the same sequence
# against two qemu-system-x86_64 -M none gets the replies recorded as QEMU's
# (skipped, 77, without QEMU).
# Usage: qmp_libvirt.sh CASE. Waits are bounded (a hang fails), never timed.
. "$(dirname "$0")/lib.sh"
case=$1
command -v openssl >/dev/null || skip "openssl is not installed"
"$(dirname "$0")/../tls/gen-certs.sh" "$T/certs" >/dev/null 2>&1 || skip "cannot make certificates (openssl)"
dst_tls=$T/certs/dst-ok
[ "$case" = dst-fails ] && dst_tls=$T/certs/dst-otherca
if [ "$case" = qemu ]; then
	QEMU=$(command -v qemu-system-x86_64) || skip "qemu-system-x86_64 is not installed (Debian's qemu-system-x86)"
	for side in dst src; do
		"$QEMU" -M none -nodefaults -display none $([ $side = dst ] && echo -incoming defer) \
			-qmp "unix:$T/$side.qmp,server=on,wait=off" >"$T/$side.log" 2>&1 &
		PIDS+=($!)
	done
else
	"$GODWIT" run --incoming defer --qmp "$T/dst.qmp" >"$T/dst.out" 2>"$T/dst.log" &
	PIDS+=($!)
	"$GODWIT" run --memory 64M --fill mix --workload verify:rate=5000 --qmp "$T/src.qmp" \
		--api "$T/src.sock" >"$T/src.out" 2>"$T/src.log" &
	PIDS+=($!)
fi
for _ in $(seq 1 200); do [ -S "$T/src.qmp" ] && [ -S "$T/dst.qmp" ] && break; sleep 0.1; done
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 "$(dirname "$0")/qmp/libvirt.py" "$case" "$T/src.qmp" "$T/dst.qmp" "tcp:127.0.0.1:$port" \
	"$T/certs/src-ok" "$dst_tls" "$T/play.jsonl" >"$T/play.txt" 2>&1 ||
	fail "libvirt's sequence ($case): $(cat "$T/play.txt"; tail -n 5 "$T/play.jsonl")"
[ "$case" = qemu ] && pass "libvirt's p2p sequence has QEMU's replies ($("$QEMU" --version | head -1))"
grep -q "param_set name=tls-creds value=$T/certs/src-ok live=0" "$T/src.log" ||
	fail "the source did not take the x509 object's dir as tls-creds"
case $case in
postcopy)
	grep -q ' mig  *pre_switchover round=' "$T/src.log" && grep -q ' mig  *continue waited_us=' "$T/src.log" ||
		fail "no pre_switchover/continue in the source log" ;;
live-params)
	grep -q 'param_set name=downtime-limit-us value=60000000 live=1' "$T/src.log" ||
		fail "the running migration did not take the downtime limit: $(grep param_set "$T/src.log")"
	# No switchover before the change (1 ms fits no round), one after it.
	awk '/param_set name=downtime-limit-us value=60000000 live=1/ { c = 1 } / mig  *pre_switchover / { print c + 0; exit }' \
		"$T/src.log" | grep -qx 1 || fail "the switchover did not follow the new limit: $(grep -E 'param_set|pre_switchover|round_start' "$T/src.log")" ;;
*)	"$GODWIT" check --api "$T/src.sock" >/dev/null || fail "source check after $case" ;;
esac
pass "libvirt's p2p sequence, case $case"
