#!/bin/bash
# Invariant: `meson install` puts the library (shared and static), the public
# headers, the pkg-config file, the godwit binary, the man pages godwit(1)
# and libgodwit(3), the README with docs/ beside it (every page a link of
# theirs or godwit(1) names) and the embedding example under the prefix;
# `pkg-config --static --libs godwit` names none of rdma-core and links;
# `pkg-config --cflags --libs godwit` then builds a program that includes
# <godwit/godwit.h> against the installed library, and it runs and prints
# gw_version(), equal to the headers' GW_VERSION_STRING; the example of
# libgodwit(3) (examples/embed.c, as installed) builds the same way and
# migrates its 16 MiB (or says this host cannot track dirty pages) without
# an engine INFO line (the library's default level is WARN); the
# installed `godwit version` runs and man can read both pages. The shared
# library exports the gw_ API and nothing else. A caller built against the
# first version of the growable ABI (tests/install/abi_ver0.c, its structs
# frozen in abi_ver0.h) migrates against the installed library, and no
# version-0 field has moved in the installed headers.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR
set -u
build=$(realpath "$1") src=$(realpath "$2")
D=$(mktemp -d /tmp/gw-install.XXXXXX)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

meson install -C "$build" --no-rebuild --destdir "$D/root" --quiet >"$D/install.log" 2>&1 ||
	fail "meson install: $(tail -5 "$D/install.log")"
prefix=$(meson introspect "$build" --buildoptions |
	python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
libdir=$(meson introspect "$build" --buildoptions |
	python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="libdir"))')
root=$D/root$prefix
case $libdir in /*) lib=$D/root$libdir ;; *) lib=$root/$libdir ;; esac
for f in "$root/bin/godwit" "$lib/libgodwit.so" "$lib/libgodwit.a" "$lib/pkgconfig/godwit.pc" \
	 "$root/include/godwit/godwit.h" "$root/include/godwit/version.h" \
	 "$root/share/doc/godwit/README.md" "$root/share/doc/godwit/examples/embed.c" \
	 "$root/share/man/man1/godwit.1" "$root/share/man/man3/libgodwit.3"; do
	[ -e "$f" ] || fail "not installed: ${f#"$D"/root}"
done
# Every page the installed README, docs and godwit(1) point to is installed, where the link says.
doc=$root/share/doc/godwit
for md in "$doc/README.md" "$doc"/docs/*.md; do
	for target in $(grep -o '](\([^)#:]*\)' "$md" | sed 's/^](//' | sort -u); do
		[ -e "$(dirname "$md")/$target" ] || fail "${md#"$doc"/} links to $target, not installed"
	done
done
for page in $(cat "$src"/docs/man/*.scd | grep -o '[a-z-]*\.md' | sort -u); do
	[ -e "$doc/docs/$page" ] || fail "a man page names $page, not installed in share/doc/godwit/docs"
done
# Only the API leaves the shared library.
others=$(nm -D --defined-only "$lib/libgodwit.so" | awk '$2 ~ /[TDBR]/ {print $3}' | grep -v '^gw_' | grep -v '^_' || true)
[ -z "$others" ] || fail "libgodwit.so exports non-API symbols: $(echo $others | head -c 300)"
nm -D --defined-only "$lib/libgodwit.so" | grep -q ' T gw_version$' || fail "gw_version not exported"
nm -D --defined-only "$lib/libgodwit.so" | grep -q ' T gw_source_main$' && fail "internal gw_source_main exported"

export PKG_CONFIG_PATH=$lib/pkgconfig
# The .pc names the prefix it was configured with; the tree lives under the temporary root.
flags=$(pkg-config --define-variable=prefix="$root" --cflags --libs godwit) || fail "pkg-config godwit"
cc -o "$D/hello" "$src/tests/install/hello.c" $flags || fail "building against the installed library ($flags)"
out=$(LD_LIBRARY_PATH=$lib "$D/hello") || fail "hello: $out"
# A private prefix as the README shows it: an rpath, and no LD_LIBRARY_PATH.
cc -o "$D/hello-rpath" "$src/tests/install/hello.c" $flags -Wl,-rpath,"$lib" || fail "linking with an rpath"
env -u LD_LIBRARY_PATH "$D/hello-rpath" >/dev/null || fail "the program linked with -Wl,-rpath does not run"
# A static link needs none of rdma-core (its libraries are opened when rdma: is used).
static=$(pkg-config --define-variable=prefix="$root" --static --libs godwit) || fail "pkg-config --static"
case $static in *rdma*|*verbs*|*-lnl-*) fail "pkg-config --static --libs godwit pulls rdma-core: $static" ;; esac
cc -static-libgcc -o "$D/hello-static" "$src/tests/install/hello.c" \
	$(pkg-config --define-variable=prefix="$root" --cflags godwit) "$lib/libgodwit.a" \
	$(echo "$static" | sed 's/-lgodwit//') || fail "linking libgodwit.a with --static --libs ($static)"
"$D/hello-static" >/dev/null || fail "the program linked with libgodwit.a does not run"
echo "$out"
# The example of libgodwit(3), as installed, built and run the same way.
cc -o "$D/embed" "$root/share/doc/godwit/examples/embed.c" $flags ||
	fail "building the libgodwit(3) example against the installed library"
LD_LIBRARY_PATH=$lib "$D/embed" >"$D/embed.out" 2>&1
rc=$?
case $rc in
0) grep -q "equal" "$D/embed.out" || fail "embed: $(cat "$D/embed.out")"
   # Quiet by default: a migration that works logs nothing but through the example's sink.
   ! grep -E ' (INFO|DEBUG) ' "$D/embed.out" || fail "embed printed the engine's INFO lines" ;;
77) echo "embed: $(tail -1 "$D/embed.out") (built; not run here)" ;;
*) fail "embed exited $rc: $(tail -5 "$D/embed.out")" ;;
esac
tail -1 "$D/embed.out"
# A caller of the first version of the growable ABI (tests/install/abi_ver0.h: frozen
# structs, no installed header) runs against this library, and every field it knows
# sits where the installed headers put it.
libs=$(pkg-config --define-variable=prefix="$root" --libs godwit) || fail "pkg-config --libs godwit"
cc -o "$D/abi0" "$src/tests/install/abi_ver0.c" $libs ||
	fail "building the version-0 caller against the installed library"
cc -o "$D/abi_now" -DABI_LAYOUT_CURRENT "$src/tests/install/abi_ver0.c" $flags ||
	fail "building the layout probe against the installed headers"
LD_LIBRARY_PATH=$lib "$D/abi0" layout >"$D/abi0.layout" && "$D/abi_now" >"$D/abi_now.layout" ||
	fail "printing the layouts"
diff -u "$D/abi0.layout" "$D/abi_now.layout" >"$D/abi.diff" ||
	fail "a version-0 field moved or changed size: $(head -20 "$D/abi.diff")"
LD_LIBRARY_PATH=$lib "$D/abi0" >"$D/abi0.out" 2>&1
rc=$?
case $rc in
0|77) tail -1 "$D/abi0.out" ;;
*) fail "version-0 caller exited $rc: $(tail -5 "$D/abi0.out")" ;;
esac
v=$(LD_LIBRARY_PATH=$lib "$root/bin/godwit" version) || fail "installed godwit version"
echo "$v"
case $v in "godwit "*) ;; *) fail "godwit version printed '$v'" ;; esac
if command -v man >/dev/null; then
	for page in "$root/share/man/man1/godwit.1" "$root/share/man/man3/libgodwit.3"; do
		MANWIDTH=80 man -l "$page" 2>/dev/null | grep -q "^NAME" || fail "man cannot read $page"
	done
fi
echo "PASS: installed tree under $prefix builds and runs an embedder"
