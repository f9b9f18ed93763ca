#!/bin/bash
# Invariant: the compatibility rule of docs/protocol.md ("Compatibility")
# holds against every release tagged in this repository's history: a tagged
# release of this build's wire version migrates to this build and this build
# to it, verified both ways (digest equal, the destination's check passes); a
# tagged release of another wire version and this build refuse each other at
# the handshake, before anything is paused: the migration exits 1, this
# build's side logs a reason naming both wire versions and both releases,
# and the source VM keeps running with its memory intact.
# Each release is built from its tag (git archive of the tag, meson, ninja of
# tools/godwit alone) into COMPAT_DIR, once: later runs reuse the binary.
# The releases are the tags (v*) reachable from HEAD, and those listed in
# tests/integration/releases by commit (a clone without tags has them as
# ancestors of main). Skips (77) without git, outside a git checkout (a
# tarball) or where no release's commit is in the clone (a shallow clone).
# Usage: compat.sh SOURCE_ROOT COMPAT_DIR
src_root=$1 cache=$2
say_skip() { echo "SKIP: $*"; exit 77; }
command -v git >/dev/null || say_skip "no git: the tagged releases cannot be built"
git -C "$src_root" rev-parse --git-dir >/dev/null 2>&1 ||
	say_skip "$src_root is not a git checkout (a tarball?): no tagged releases to build"
# rev[NAME]: the commit of each release found, tags first.
declare -A rev
for t in $(git -C "$src_root" tag --merged HEAD --list 'v[0-9]*'); do
	rev[$t]=$(git -C "$src_root" rev-parse "$t^{commit}")
done
while read -r name commit; do
	case $name in '#'* | '') continue ;; esac
	[ -n "${rev[$name]:-}" ] && continue
	git -C "$src_root" merge-base --is-ancestor "$commit" HEAD 2>/dev/null && rev[$name]=$commit
done <"$src_root/tests/integration/releases"
tags=$(printf '%s\n' "${!rev[@]}" | sort -V)
[ -n "$tags" ] || say_skip "no release (a v* tag, or a commit of tests/integration/releases) in this clone's history"
wire_of() {	# wire_of TREE-ISH: GW_WIRE_VERSION in that tree
	git -C "$src_root" show "${rev[$1]}:src/wire/wire.h" | sed -n 's/^#define GW_WIRE_VERSION[[:space:]]*\([0-9]*\).*/\1/p'
}
release_of() { git -C "$src_root" show "${rev[$1]}:meson.build" | sed -n "s/^  version : '\(.*\)',/\1/p"; }
# Build each release once (outside lib.sh: its time bound guards a
# migration, not a first build of an old release).
mkdir -p "$cache"
for tag in $tags; do
	b=$cache/$tag
	[ -x "$b/build/tools/godwit" ] && continue
	echo "building $tag into $b (once)"
	rm -rf "$b" && mkdir -p "$b/src" || exit 1
	git -C "$src_root" archive "${rev[$tag]}" | tar -x -C "$b/src" || { echo "FAIL: git archive $tag"; exit 1; }
	meson setup "$b/build" "$b/src" --buildtype=release >"$b/setup.log" 2>&1 ||
		{ echo "FAIL: meson setup of $tag: $(tail -5 "$b/setup.log")"; exit 1; }
	nice -n 10 ninja -C "$b/build" tools/godwit >"$b/ninja.log" 2>&1 ||
		{ echo "FAIL: building $tag: $(tail -5 "$b/ninja.log")"; exit 1; }
done
. "$(dirname "$0")/lib.sh"
NEW=$GODWIT
new_wire=$(sed -n 's/^#define GW_WIRE_VERSION[[:space:]]*\([0-9]*\).*/\1/p' "$src_root/src/wire/wire.h")
new_rel=$("$GODWIT_BIN" version | sed -n 's/^godwit \([^ ]*\).*/\1/p')
[ -n "$new_wire" ] && [ -n "$new_rel" ] || fail "this build's wire version ($new_wire) or release ($new_rel)"

# migrate_pair SRC_BIN DST_BIN: a verify workload from SRC_BIN's VM to
# DST_BIN's; leaves $T/mig.json, $T/mig.err, $T/src.log, $T/dst.log; returns
# migrate's exit status.
migrate_pair() {
	local sbin=$1 dbin=$2 rc
	GODWIT=$dbin start_dst tcp:127.0.0.1:0 --exit-after-migrate --set io-timeout-ms=5000
	GODWIT=$sbin start_src --memory 64M --workload verify:rate=2000
	"$sbin" migrate --api "$T/src.sock" --to "$DST_URL" --json >"$T/mig.json" 2>"$T/mig.err"
	rc=$?
	return $rc
}
stop_all() {
	local p
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	PIDS=()
	rm -f "$T/src.sock" "$T/dst.sock" "$T/dst.out" "$T/src.out"	# start_dst reads the URL from dst.out
}

summary=()
for tag in $tags; do
	rel=$(release_of "$tag") wire=$(wire_of "$tag")
	[ "$rel" = "$new_rel" ] && continue	# this build is that release
	OLD=$(accel_wrap "$cache/$tag/build/tools/godwit" "godwit-$tag")
	for dir in old-new new-old; do
		if [ "$dir" = old-new ]; then sbin=$OLD dbin=$NEW; else sbin=$NEW dbin=$OLD; fi
		migrate_pair "$sbin" "$dbin"
		rc=$?
		if [ "$wire" = "$new_wire" ]; then
			[ "$rc" = 0 ] || fail "$tag $dir: same wire version $wire, migrate exit $rc: $(cat "$T/mig.err")"
			[ "$(jget "$T/mig.json" "d['status']")" = completed ] || fail "$tag $dir: $(cat "$T/mig.json")"
			[ "$(jget "$T/mig.json" "d.get('verify')")" = ok ] || fail "$tag $dir: verify $(jget "$T/mig.json" "d.get('verify')")"
			wait "$DST_PID" 2>/dev/null
			summary+=("$tag ($rel, wire $wire) $dir: migrated, verified")
		else
			[ "$rc" = 1 ] || fail "$tag $dir: wire $wire against $new_wire, migrate exit $rc (want 1)"
			all="$(cat "$T/mig.json" "$T/mig.err" "$T/src.log" "$T/dst.log")"
			# This build's side names both versions and both releases (the
			# peer's from its version); a 0.2.x side names neither.
			grep -q "wire version $wire (godwit ${rel%.*}.x); this side speaks version $new_wire (godwit $new_rel)" <<<"$all" ||
				fail "$tag $dir: this build's refusal does not name both releases: $(grep -m3 -iE 'wire version' <<<"$all")"
			grep -q "vm_pause\|mig_switchover" "$T/src.log" && fail "$tag $dir: the source paused its VM"
			GODWIT=$sbin assert_source_alive_and_consistent
			summary+=("$tag ($rel, wire $wire) $dir: refused at HELLO, source runs: $(grep -m1 -o "wire version $wire ([^)]*); this side speaks version $new_wire ([^)]*)" <<<"$all")")
		fi
		stop_all
	done
done
[ ${#summary[@]} -gt 0 ] || skip "every tag reachable from HEAD is this release ($new_rel)"
printf '%s\n' "${summary[@]}"
pass "${#summary[@]} pairings against $(wc -w <<<"$tags") tagged release(s), this build $new_rel (wire $new_wire)"
