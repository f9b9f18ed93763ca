#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Invariant: godwit refuses a command line it cannot carry out before it
# makes anything (no VM created, no RAM allocated), with a reason that names
# what the user typed and what to do:
#  - bad usage exits 2: a bad --incoming URL (named once), a bad workload
#    (also with --prealloc: nothing allocated first; a working set larger
#    than --memory), a bad --to URL (before the API is asked), a negative
#    QEMU-unit parameter (its unit named), a source's option on a
#    destination, an option given twice, --on-timeout without a converge
#    timeout, a workload the chosen backend cannot run;
#  - a --memory this host cannot hold exits 1 with the host's figures: more
#    than its RAM and swap, or, allocated at start (--prealloc), more than it
#    has available; demo counts both VMs;
#  - --accel auto takes the first backend that can run the workload
#    (balloon: the soft VM, whether KVM works here or not);
#  - demo refuses the same before starting a child, and a destination that
#    dies before listening is reported with its reason and its log's path.
# The memory cases run under a 4 GiB address-space limit: a check that let
# them through could not fill the host. A sanitizer build (ASan, TSan) needs
# terabytes of address space: there the limit is off and the memory cases
# are left out (the plain build runs them). No duration is asserted.
set -u
G=${1:?usage: test_cli_refuse.sh PATH-TO-godwit}
D=$(mktemp -d /tmp/gw-cli-refuse.XXXXXX)
PIDS=()
n=0
# A sanitizer's runtime reserves its shadow memory: no address-space limit then.
sanitized=0
ldd "$G" 2>/dev/null | grep -Eq 'lib(a|t)san' && sanitized=1
vlimit=4194304
[ "$sanitized" = 1 ] && vlimit=unlimited

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$D"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	exit 1
}

# refused RC PATTERN ARGS...: godwit ARGS exits RC, its stderr matches the
# ERE PATTERN, and it made no VM.
refused() {
	local want=$1 pat=$2 rc
	shift 2
	# A command that is not refused would run its VM: a bound, never reached when it is.
	(ulimit -v "$vlimit"; exec timeout -k 5 60 "$G" "$@") >"$D/out" 2>"$D/err"
	rc=$?
	[ "$rc" -eq "$want" ] || fail "'godwit $*' exited $rc, want $want: $(cat "$D/err")"
	grep -Eq -- "$pat" "$D/err" || fail "'godwit $*' said: $(cat "$D/err"), want /$pat/"
	grep -Eq "vm_created|ram_filled|ram_prealloc" "$D/err" && fail "'godwit $*' made its VM first: $(cat "$D/err")"
	n=$((n + 1))
	echo "ok $n godwit $*: $(head -c 300 "$D/err" | tr '\n' ' ')"
}

kib() { awk -v k="$1" '$1 == k ":" { print $2 }' /proc/meminfo; }
host_kib=$(( $(kib MemTotal) + $(kib SwapTotal) ))

# Usage errors: 2, nothing made.
refused 2 "--incoming: URL 'bogus:x'" run --accel soft --memory 16M --incoming bogus:x
[ "$(grep -o "bogus:x" "$D/err" | wc -l)" -eq 1 ] || fail "the URL is printed more than once: $(cat "$D/err")"
refused 2 "--workload: unknown workload 'bogus'" run --accel soft --memory 16M --workload bogus
refused 2 "--workload: unknown workload" run --accel soft --memory 256M --prealloc --workload bogus
refused 2 "--fill is a source's.*leave out --fill" run --incoming "unix:$D/m.sock" --fill mix
refused 2 "ws=1G\) is larger than the guest's --memory 16M: give ws=16M or less" run --accel soft --memory 16M --workload dirty:ws=1G
refused 2 "--to foo:1: URL 'foo:1': unknown transport" migrate --api "$D/none.sock" --to foo:1
refused 2 "max-bandwidth: bad value '-1' \(bytes/s, at least 0\)" run --accel soft --set max-bandwidth=-1
refused 2 "--workload is a source's" run --incoming "unix:$D/m.sock" --workload verify
refused 2 "--incoming given twice" run --incoming "unix:$D/a.sock" --incoming "unix:$D/b.sock"
refused 2 "--accel kvm: the balloon workload .* use --accel soft" run --accel kvm --memory 16M --workload balloon
refused 2 "--to given twice" migrate --api "$D/x.sock" --to "unix:$D/a" --to "unix:$D/b"
refused 2 "--on-timeout .* add --converge-timeout" migrate --api "$D/x.sock" --to "unix:$D/a" --on-timeout force
refused 2 "--on-timeout .* add --converge-timeout" demo --accel soft --memory 16M --on-timeout cancel
refused 2 "--to: URL 'BAD' is not SCHEME:ADDRESS" demo --accel soft --memory 16M --to BAD
refused 2 "--to given twice" demo --to "unix:$D/a" --to "unix:$D/b"
# With a timeout, --on-timeout is fine: the next error is the missing API socket.
refused 1 "x.sock" migrate --api "$D/x.sock" --to "unix:$D/a" --converge-timeout 100 --on-timeout force

# Memory: 1, the host's figures, what to type instead.
if [ "$sanitized" = 0 ]; then
refused 1 "--memory $((host_kib * 2 / 1024))M: more than this host's memory .* of RAM.*give --memory [0-9]+[GMK] or less" \
	run --accel soft --memory "$((host_kib * 2 / 1024))M"
# All of RAM and swap: mapped it would be allowed; allocated at start it is
# more than what is available, which is always below the total.
refused 1 "--prealloc allocates all of it at start: .*, more than the .* available now .*leave out --prealloc" \
	run --accel soft --memory "$((host_kib / 4 * 4))K" --prealloc
refused 1 "more than this host's memory" demo --accel soft --memory "$((host_kib * 2 / 1024))M"
# Each VM fits alone; the two together (the verify workload writes all of
# the source's, the destination is preallocated) cannot.
refused 1 "both VMs on this host use all of theirs .*: .*, more than the .* available now" \
	demo --accel soft --memory "$((host_kib / 4 * 3 / 1024))M"
else
	echo "# the memory cases: left out in a sanitizer build (no address-space limit)"
fi

# --accel auto with the balloon workload: the soft VM, even where KVM works.
"$G" run --memory 16M --workload balloon --api "$D/b.sock" 2>"$D/b.err" &
PIDS+=($!)
for _ in $(seq 300); do
	"$G" status --api "$D/b.sock" --json 2>/dev/null | grep -q '"vm-status":"running"' && break
	sleep 0.2
done
"$G" status --api "$D/b.sock" --json | grep -q '"accel":"soft"' ||
	fail "balloon on --accel auto: $("$G" status --api "$D/b.sock" --json) $(cat "$D/b.err")"
"$G" quit --api "$D/b.sock" >/dev/null || fail "quit"
n=$((n + 1))
echo "ok $n run --workload balloon (--accel auto) runs on the soft VM"

# demo: a destination that cannot listen, reported with its reason and log.
"$G" demo --accel soft --memory 16M --to "unix:$D/no/such/dir/m.sock" >/dev/null 2>"$D/demo.err"
rc=$?
[ "$rc" -eq 1 ] || fail "demo to an unusable path exited $rc: $(cat "$D/demo.err")"
grep -q "before listening: godwit: cannot listen: unix:$D/no/such/dir/m.sock" "$D/demo.err" ||
	fail "demo gave no reason: $(cat "$D/demo.err")"
log=$(sed -n 's/.*(its log: \(.*\))$/\1/p' "$D/demo.err")
[ -s "$log" ] || fail "demo named no log, or an empty one: $(cat "$D/demo.err")"
rm -rf "$(dirname "$log")"
n=$((n + 1))
echo "ok $n demo: the destination's reason and log"
echo "$n passed, 0 failed"
