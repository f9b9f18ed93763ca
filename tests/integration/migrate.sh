#!/bin/bash
# Invariant: a live migration of the VM (IT_ACCEL: soft, or kvm) over TRANSPORT (tcp|unix) for
# CASE completes; the destination's RAM digest equals the source's at pause
# ("verified") and the workload advances on the destination after resume;
# the downtime breakdown adds up to the downtime.
# Workloads that write run at a fixed rate (pages/s), far below any link or
# codec here, so the outcome never depends on this machine's speed.
# Usage: migrate.sh TRANSPORT CASE
. "$(dirname "$0")/lib.sh"
transport=$1 case=$2
case $transport in
tcp) url=tcp:127.0.0.1:0 ;;
unix) url=unix:$T/mig.sock ;;
*) fail "transport $transport" ;;
esac
case $case in
idle1g)   args=(--memory 1G --workload idle) ;;
mix1g)    args=(--memory 1G --fill mix --workload idle) ;;
dirty256) args=(--memory 1G --fill mix --workload dirty:ws=256M,pattern=page,rate=5000) ;;
verify)   args=(--memory 512M --workload verify:rate=5000) ;;
local)    args=(--memory 1G --fill mix --workload verify:ws=256M,rate=5000 --local) ;;
multi)    args=(--memory 1G --fill mix --workload dirty:ws=64M,pattern=byte,rate=5000 --channels 4 --compress zstd) ;;
*) fail "case $case" ;;
esac
"$GODWIT" demo "${args[@]}" --to "$url" --json --keep-logs "$T" >"$T/out.json" || fail "demo exit $? $(cat "$T/out.json")"
[ "$(jget "$T/out.json" "d['status']")" = completed ] || fail "status"
# The backend asked for runs the VM, and KVM VMs are tracked by KVM (kvm-log by default).
[ "$(jget "$T/out.json" "d['accel']")" = "$IT_ACCEL" ] || fail "accel $(jget "$T/out.json" "d.get('accel')")"
if [ "$IT_ACCEL" = kvm ] && [ "$case" != local ]; then
	[ "$(jget "$T/out.json" "d['dirty-backend']")" = kvm-log ] || fail "tracker $(jget "$T/out.json" "d.get('dirty-backend')")"
fi
# A KVM destination checks the source's vCPUs, count and CPU profile, at HELLO.
if [ "$IT_ACCEL" = kvm ]; then
	grep -q "source_cpu_checked vcpus=1 profile_bytes=" "$T/dst.log" || fail "the source's CPU was not checked at HELLO"
fi
[ "$(jget "$T/out.json" "d['verified']")" = True ] || fail "not verified"
[ "$(jget "$T/out.json" "d['guest-progress']")" = True ] || fail "no guest progress"
# The breakdown's parts are consecutive stamps: they add up to the downtime.
jget "$T/out.json" "abs(sum(d['downtime-breakdown'].values()) - d['downtime']) < 0.01" | grep -qx True ||
	fail "breakdown $(jget "$T/out.json" "d['downtime-breakdown']") does not add up to $(jget "$T/out.json" "d['downtime']")"
if [ "$case" = idle1g ]; then
	# Never-populated memory is neither read nor sent.
	# (A KVM guest has a 4 MiB system block beside its RAM and its idle guest
	# touches a few dozen pages of each: its boot structures, stack, timer.)
	if [ "$IT_ACCEL" = kvm ]; then want="d['ram']['skipped'] >= 262144 - 256"; else want="d['ram']['skipped'] == 262144"; fi
	[ "$(jget "$T/out.json" "$want")" = True ] || fail "idle pages not skipped: $(jget "$T/out.json" "d['ram']")"
fi
if [ "$case" = local ]; then
	[ "$(jget "$T/out.json" "d['ram']['normal']")" = 0 ] || fail "local migration copied pages"
	# One copy of RAM: nothing to compare; the guest's own check still ran.
	[ "$(jget "$T/out.json" "d['verify']")" = off ] || fail "local: verify $(jget "$T/out.json" "d['verify']")"
	[ "$(jget "$T/out.json" "d['destination-verify-check']")" = ok ] || fail "local: workload check"
else
	[ "$(jget "$T/out.json" "d['verify']")" = ok ] || fail "verify $(jget "$T/out.json" "d['verify']")"
fi
pass "$transport $case: $(jget "$T/out.json" "'total %.1f ms, downtime %.3f ms, %d rounds' % (d['total-time'], d['downtime'], d['rounds'])")"
