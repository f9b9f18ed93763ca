#!/bin/bash
# The fuzz regression test of one harness: its seeds (made now by gen_seeds)
# and the inputs kept in regress/HARNESS/ go through it once, no invariant
# may break. Usage: replay.sh REPLAY_BINARY GEN_SEEDS HARNESS REGRESS_DIR
set -eu
bin=$1 gen=$2 harness=$3 regress=$4
dir=$(mktemp -d /tmp/gw-fuzz-replay.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$gen" "$dir" >/dev/null
inputs=("$dir/$harness")
[ -d "$regress/$harness" ] && inputs+=("$regress/$harness")
"$bin" "${inputs[@]}"
