#!/usr/bin/env bash
# cli_readme.sh - the README's "Using it" block runs as written from the repository root: every
# file a line reads is one an earlier line made. Run here in a scratch root whose build/bin/saga is
# the binary under test, with smaller sizes where a line would take minutes (the paths and the
# options stay as written); the mpirun lines are left to mpi_cli.sh.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"
readme=${SAGA_SRC_DIR:-$(dirname "$0")/..}/README.md

block=$(awk '/^## Using it/ { on = 1 } on && /^```sh/ { inside = 1; next } inside && /^```/ { exit }
             inside' "$readme")
[ -n "$block" ] || fail "no sh block under '## Using it' in $readme"
mkdir -p "$TMP/root/build/bin"
ln -sf "$(cd "$(dirname "$SAGA_BIN")" && pwd)/$(basename "$SAGA_BIN")" "$TMP/root/build/bin/saga"
cd "$TMP/root"
n=0
while IFS= read -r line; do
    case $line in "" | mpirun*) continue ;; esac
    cmd=${line%%#*} # the comment off
    # smaller, not different: fewer epochs, steps, events and vertices
    cmd=$(sed -e 's/--epochs 100/--epochs 2/' -e 's/100000,20,128,8/2000,8,32,4/' \
        -e 's/200000,20,128,8/4000,8,32,4/' -e 's/--events 60/--events 4/' <<<"$cmd")
    case $cmd in
    *" gcn "*) [[ $cmd == *--epochs* ]] || cmd+=" --epochs 4" ;;
    *" mlp "*) cmd+=" --steps 2" ;;
    esac
    case $cmd in *"hep train"*) cmd+=" --epochs 1" ;; esac
    n=$((n + 1))
    expect 0 bash -c "$cmd"
done <<<"$block"
[ "$n" -ge 10 ] || fail "only $n lines in the README's block"
finish
