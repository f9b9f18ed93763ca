#!/bin/bash
# Invariant: `meson install` puts the library (shared and static), the public
# headers, the pkg-config file, the godwit binary and the docs under the
# prefix; `pkg-config --cflags --libs godwit` then builds a program that
# includes <godwit/godwit.h> against the installed library, and it runs and
# prints gw_version(), equal to the headers' GW_VERSION_STRING. The shared
# library exports the gw_ API and nothing else.
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
	 "$root/share/doc/godwit/architecture.md"; do
	[ -e "$f" ] || fail "not installed: ${f#"$D"/root}"
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
echo "$out"
"$root/bin/godwit" version >/dev/null || fail "installed godwit version"
echo "PASS: installed tree under $prefix builds and runs an embedder"
