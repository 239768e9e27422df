#!/usr/bin/env bash
# Installs saga into a temporary prefix and builds the out-of-tree example against it, once with
# find_package(saga) and once with pkg-config, then runs both on a tiny graph.
set -euo pipefail
build=$1 src=$2 work=$3 flags=${4:-}
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
printf '0 1\n1 2\n2 0\n2 3\n' >"$work/tiny.txt"

cmake -S "$src/examples/hello" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$work/prefix" \
    -DCMAKE_C_FLAGS="$flags" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
out=$("$work/cmake-build/hello" "$work/tiny.txt")
echo "cmake consumer: $out"
grep -q '4 vertices, 4 edges' <<<"$out"

libdir=$(ls -d "$work/prefix"/lib*/pkgconfig | head -1)
cflags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags saga)
libs=$(PKG_CONFIG_PATH="$libdir" pkg-config --libs saga)
# shellcheck disable=SC2086 # word splitting of the flag lists is intended
cc -std=c11 $flags $cflags "$src/examples/hello/hello.c" -o "$work/hello-pc" $libs
out=$("$work/hello-pc" "$work/tiny.txt")
echo "pkg-config consumer: $out"
grep -q '4 vertices, 4 edges' <<<"$out"
