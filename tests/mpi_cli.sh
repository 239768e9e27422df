#!/usr/bin/env bash
# mpi_cli.sh - the `saga` commands under mpiexec with 2 and 4 ranks (oversubscribed on small
# machines), each compared with one process: data-parallel HEP training against one process
# accumulating the same micro-batches, and failures on one rank that must stop every rank with
# that rank's message, never a hang.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

: "${MPIEXEC:?MPIEXEC must name the MPI launcher}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
mpi() {
    local n=$1
    shift
    timeout 300 "$MPIEXEC" -n "$n" --oversubscribe "$@"
}

# close A B REL: |A - B| <= REL * max(|A|, |B|)
close() {
    python3 -c "import sys; a, b, r = map(float, sys.argv[1:]); sys.exit(0 if abs(a - b) <= r * max(abs(a), abs(b), 1e-30) else 1)" "$@"
}

# ---- HEP: data-parallel training ------------------------------------------------------------
expect 0 "$SAGA_BIN" hep generate -o "$TMP/ev" --events 10 --seed 3 --min-particles 100 \
    --max-particles 400 --quiet
for ranks in 2 4; do
    for sampler in balanced random; do
        expect 0 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 2 --hidden 8 --iterations 2 \
            --batch-events 1 --sampler $sampler --accumulate $ranks --json --quiet
        one=$(json_get 'j["loss"]')
        one_auc=$(json_get 'j["auc"]')
        expect 0 mpi $ranks "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 2 --hidden 8 \
            --iterations 2 --batch-events 1 --sampler $sampler --json
        [ "$(json_last | grep -c '"ranks"')" = 1 ] || fail "hep $ranks ranks: one JSON object expected"
        [ "$(grep -c '^{' "$OUT")" = 1 ] || fail "hep $ranks ranks: only rank 0 prints the JSON object"
        [ "$(json_get 'j["ranks"]')" = $ranks ] || fail "hep ranks: $(json_last)"
        [ "$(json_get 'len(j["samplers"][0]["rank_peak_device_bytes"])')" = $ranks ] ||
            fail "hep: per-rank peaks: $(json_last)"
        [ "$(json_get 'all(p > 0 for p in j["samplers"][0]["rank_peak_device_bytes"])')" = True ] ||
            fail "hep: a rank without a peak: $(json_last)"
        close "$(json_get 'j["loss"]')" "$one" 1e-5 ||
            fail "hep $sampler, $ranks ranks: loss $(json_get 'j["loss"]'), one process $one"
        close "$(json_get 'j["auc"]')" "$one_auc" 1e-3 ||
            fail "hep $sampler, $ranks ranks: AUC $(json_get 'j["auc"]'), one process $one_auc"
    done
done
# a rank that cannot read its data: every rank stops, rank 0 says which rank and why
expect 1 timeout 300 "$MPIEXEC" -n 1 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 1 : \
    -n 1 "$SAGA_BIN" hep train --data "$TMP/missing" --epochs 1
expect_err "rank 1: "
expect_err "missing"

finish
