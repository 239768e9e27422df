#!/usr/bin/env bash
# seed.sh - writes small seed inputs for the fuzz targets into fuzz/corpus-<target>/.
#
#   fuzz/seed.sh [SAGA_BINARY]
#
# The text targets take one leading byte of options (see fuzz_common.h and fuzz_features.c), so
# each text seed is written with a few different option bytes. The .sgr seeds are made with
# `saga convert` (default: build-fuzz/bin/saga); without that binary they are skipped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
saga=${1:-$here/../build-fuzz/bin/saga}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# seed TARGET NAME TEXT: TEXT with option bytes 0x00, 0x05 and 0x3a, plain and gzip.
seed() {
    local dir=$here/corpus-$1 name=$2 text=$3
    mkdir -p "$dir"
    printf '%s' "$text" >"$tmp/$name"
    gzip -9 -n -c "$tmp/$name" >"$tmp/$name.gz"
    for opt in 00 05 3a; do
        { printf "\\x$opt"; cat "$tmp/$name"; } >"$dir/$name-$opt"
        { printf "\\x$opt"; cat "$tmp/$name.gz"; } >"$dir/$name-$opt.gz"
    done
}

seed edgelist plain $'0 1\n1 2\n2 0\n'
seed edgelist snap $'# Directed graph\n# Nodes: 4 Edges: 4\n10\t20\r\n20\t30\r\n30\t10\r\n30\t30\r\n'
seed edgelist weighted $'1 2 0.5\n2 3 1e-3\n3 1 -2\n\n% comment\n'
seed edgelist bigids $'9223372036854775807 0\n4294967296 1\n1 4294967296\n'

seed mtx general $'%%MatrixMarket matrix coordinate real general\n% c\n4 4 3\n1 2 0.5\n2 3 1.5\n4 1 -2\n'
seed mtx symmetric $'%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n1 1\n2 1\n3 2\n'
seed mtx integer $'%%MatrixMarket matrix coordinate integer general\r\n2 2 2\r\n1 2 7\r\n2 1 -3\r\n'
seed mtx array $'%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n'

seed metis plain $'7 11\n5 3 2\n1 3 4\n5 4 2 1\n2 3 6 7\n1 3 6\n5 4 7\n6 4\n'
seed metis weighted $'% manual example\n7 11 1\n5 1 3 2 2 1\n1 1 3 2 4 1\n5 3 4 2 2 2 1 2\n2 1 3 2 6 2 7 5\n1 1 3 3 6 2\n5 2 4 2 7 6\n6 6 4 5\n'
seed metis vertexcols $'4 2 111 2\n1 5 6 2 7\n1 0 0 1 7 4 9\n2 3 3\n1 1 1 2 9\n'
seed metis isolated $'4 1\n\n3\n2\n\n'

seed features sparse $'# cora style\n0 19\n0 81\n1 3\n2 7\n'
seed features sparsevals $'0 1 0.5\n3 0 -2\n6 7 1e3\n'
seed features dense $'0.5 1 -2\n3 4 5e-1\n0 0 0\n'
seed features labels $'3\n-1\n\n0\n2\n'
seed features pairs $'0 2\n3 1\n6 -1\n'
seed features index $'# split\n0\n3\n6\n'

mkdir -p "$here/corpus-sgr"
if [[ -x $saga ]]; then
    printf '0 1\n1 2\n2 0\n2 2\n' >"$tmp/a.txt"
    printf '10 20 0.5\n20 30 2\n30 10 -1\n' >"$tmp/w.txt"
    printf '%%%%MatrixMarket matrix coordinate pattern general\n5 5 2\n1 2\n3 1\n' >"$tmp/iso.mtx"
    printf '7 11 1\n5 1 3 2 2 1\n1 1 3 2 4 1\n5 3 4 2 2 2 1 2\n2 1 3 2 6 2 7 5\n1 1 3 3 6 2\n5 2 4 2 7 6\n6 6 4 5\n' >"$tmp/m.graph"
    "$saga" convert --quiet "$tmp/a.txt" "$here/corpus-sgr/plain.sgr"
    "$saga" convert --quiet "$tmp/w.txt" "$here/corpus-sgr/weighted-ids.sgr"
    "$saga" convert --quiet "$tmp/iso.mtx" "$here/corpus-sgr/isolated.sgr"
    "$saga" convert --quiet "$tmp/m.graph" "$here/corpus-sgr/metis.sgr"
    "$saga" convert --quiet --undirected "$tmp/a.txt" "$here/corpus-sgr/undirected.sgr"
else
    echo "seed.sh: $saga not found; no .sgr seeds (build the saga_cli target first)" >&2
fi
echo "seeds written under $here/corpus-*"
