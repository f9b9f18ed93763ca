#!/bin/sh
# Install the Debian 12 packages godwit needs, only those that are missing.
# Usage: scripts/deps.sh [build|test|bench|ci|fuzz]
#   test: + integration tools and openssl (TLS certificates made at test time)
#   bench: + iperf3, hyperfine, qemu-system-x86; ci: test + clang and its sanitizer/libFuzzer runtimes
#   fuzz: clang and libFuzzer (Debian 12: clang-14, libclang-rt-14-dev)
set -eu
level=${1:-build}
# qemu-system-x86 (about 30 packages) only for bench: bench/vs_qemu.py migrates
# the same RAM with QEMU; the QMP comparison test (tests/integration/qmp.sh
# qemu) uses it when installed and skips otherwise.
pkgs="gcc make meson ninja-build pkg-config libzstd-dev liblz4-dev zlib1g-dev libisal-dev libxxhash-dev libjansson-dev libssl-dev scdoc librdmacm-dev libibverbs-dev"
case "$level" in
test)  pkgs="$pkgs iproute2 python3 socat openssl util-linux" ;;
bench) pkgs="$pkgs iproute2 python3 socat openssl iperf3 hyperfine python3-matplotlib linux-perf qemu-system-x86" ;;
ci)    pkgs="$pkgs iproute2 python3 socat openssl util-linux clang libclang-rt-14-dev" ;;
fuzz)  pkgs="$pkgs openssl clang libclang-rt-14-dev" ;;
esac
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing:$missing" >&2
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages:$missing; run as root or install them with apt-get" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
