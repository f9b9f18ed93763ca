#!/bin/bash
# Invariant: a local migration (--local: the destination maps the source's
# RAM, one copy, nothing to compare) of the VM (IT_ACCEL: soft, or kvm) is
# verified by the guest's own check on the destination: `godwit demo` exits
# 0 and says "verified: yes (RAM shared (local), workload check ok)" when the
# check holds, and exits 1 with the check's failure when a page is wrong.
# Cases:
#   dirty    the dirty workload on 2 GiB of mix, as an operator types it
#            (text report)
#   verify   the verify workload (--json)
#   corrupt  the dirty workload, one byte of guest RAM changed on the
#            destination before resume (test build's dst-corrupt-page)
# Usage: local.sh CASE
. "$(dirname "$0")/lib.sh"
case=$1
url=unix:$T/mig.sock
want_line='verified:          yes (RAM shared (local), workload check ok)'

# check_json FILE VERIFIED CHECK-PREFIX: the JSON report of a completed local migration.
check_json() {
	[ "$(jget "$1" "d['status']")" = completed ] || fail "status $(jget "$1" "d.get('status')")"
	[ "$(jget "$1" "d['accel']")" = "$IT_ACCEL" ] || fail "accel $(jget "$1" "d.get('accel')")"
	[ "$(jget "$1" "d['ram']['normal']")" = 0 ] || fail "a local migration copied pages"
	[ "$(jget "$1" "d['verify']")" = off ] || fail "verify $(jget "$1" "d['verify']"): one copy of RAM, no digest"
	[ "$(jget "$1" "d['verified']")" = "$2" ] || fail "verified $(jget "$1" "d['verified']"), expected $2"
	jget "$1" "d['destination-verify-check']" | grep -q "^$3" ||
		fail "workload check '$(jget "$1" "d['destination-verify-check']")', expected $3"
	jget "$1" "d['verified-detail']" | grep -q "^RAM shared (local), workload check $3" ||
		fail "verified-detail '$(jget "$1" "d.get('verified-detail')")'"
}

case $case in
dirty)
	"$GODWIT" demo --memory 2G --fill mix --workload dirty --to "$url" --local --keep-logs "$T" \
		>"$T/out.txt" 2>"$T/demo.err" || fail "demo exit $? $(cat "$T/out.txt" "$T/demo.err")"
	grep -qxF "$want_line" "$T/out.txt" || fail "report: $(grep verified: "$T/out.txt")"
	grep -q "post_migration_check.*\(result=ok\|ok=1\)" "$T/dst.log" ||
		fail "the destination's guest check did not run"
	pass "dirty: $(grep -E '^(downtime|verified):' "$T/out.txt" | tr -s ' ' | paste -sd ';')" ;;
verify)
	"$GODWIT" demo --memory 512M --fill mix --workload verify:rate=5000 --to "$url" --local --json \
		--keep-logs "$T" >"$T/out.json" || fail "demo exit $? $(cat "$T/out.json")"
	check_json "$T/out.json" True ok
	[ "$(jget "$T/out.json" "d['guest-progress']")" = True ] || fail "no guest progress"
	pass "verify: $(jget "$T/out.json" "d['verified-detail']")" ;;
corrupt)
	[ -n "${GODWIT_FI:-}" ] || skip "no test build (GODWIT_FI)"
	GW_FAULT=dst-corrupt-page "$GODWIT_FI" demo --memory 256M --fill mix --workload dirty:ws=64M \
		--to "$url" --local --json --keep-logs "$T" >"$T/out.json"
	rc=$?
	[ "$rc" = 1 ] || fail "demo exit $rc after a wrong page, expected 1 $(cat "$T/out.json")"
	grep -q "point=dst-corrupt-page" "$T/dst.log" || fail "the fault point did not fire"
	check_json "$T/out.json" False failed
	pass "corrupt: $(jget "$T/out.json" "d['verified-detail']")" ;;
*) fail "case $case" ;;
esac
