#!/usr/bin/env bash
# eval.sh - the whole epoch of `saga gcn` (training plus the evaluation after it) on a generated
# citation graph, in memory and streamed through a quarter of the in-memory peak: ms per epoch
# for training, evaluation and both (medians over the epochs, then over RUNS alternating runs),
# and the final accuracies. With BASE naming another build's saga binary, that build runs
# alternating with this one on the same flags, and the ratios of the medians are printed.
#
#   bench/eval.sh [BUILD_DIR]      (EPOCHS=20 RUNS=3 N=200000 DEG=20 F=128 C=8 DEVICE=cpu BASE=)
set -euo pipefail
build=${1:-build}
saga=$build/bin/saga
base=${BASE:-}
epochs=${EPOCHS:-20} runs=${RUNS:-3} device=${DEVICE:-cpu}
n=${N:-200000} deg=${DEG:-20} f=${F:-128} c=${C:-8}
[ -x "$saga" ] || { echo "eval.sh: $saga not built" >&2; exit 1; }
[ -z "$base" ] || [ -x "$base" ] || { echo "eval.sh: BASE=$base is not an executable" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "machine: $(nproc --all) cores (${OMP_NUM_THREADS:-all} threads), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "graph:   generated citation graph, $n vertices, mean degree $deg, $f features, $c classes; $epochs epochs, device $device"
syn=(--synthetic "$n,$deg,$f,$c")
peak=$("$saga" gcn "${syn[@]}" --epochs 2 --device "$device" --stats --json --quiet | tail -1 |
    python3 -c "import json,sys; print(json.loads(sys.stdin.read())['peak_device_bytes'])")
budget=$((peak / 4))
echo "in-memory peak $peak bytes (this build); streamed runs get $budget"
# one run: "train_ms eval_ms both_ms test_accuracy val_accuracy" (medians over the epochs)
one() {
    local bin=$1
    shift
    "$bin" gcn "${syn[@]}" --epochs "$epochs" --device "$device" --quiet --log "$tmp/log" "$@" \
        >/dev/null
    python3 - "$tmp/log" <<'EOF'
import json, statistics, sys
e = [json.loads(l) for l in open(sys.argv[1])]
m = statistics.median
print("%.3f %.3f %.3f %r %r" % (m(x["epoch_ms"] for x in e), m(x["eval_ms"] for x in e),
      m(x["epoch_ms"] + x["eval_ms"] for x in e), e[-1]["test_accuracy"], e[-1]["val_accuracy"]))
EOF
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf "%-26s %10s %10s %10s %8s %8s\n" run "train ms" "eval ms" "epoch ms" test val
for mode in memory streamed; do
    flags=()
    [ "$mode" = streamed ] && flags=(--device-mem "$budget")
    bins=(this)
    [ -n "$base" ] && bins=(base this)
    declare -A tr=() ev=() bo=()
    for ((r = 1; r <= runs; r++)); do
        for b in "${bins[@]}"; do
            bin=$saga
            [ "$b" = base ] && bin=$base
            read -r t e both acc val < <(one "$bin" "${flags[@]}")
            tr[$b]="${tr[$b]:-} $t" ev[$b]="${ev[$b]:-} $e" bo[$b]="${bo[$b]:-} $both"
            printf "%-26s %10.2f %10.2f %10.2f %8s %8s\n" "$b, $mode (run $r)" "$t" "$e" "$both" "$acc" "$val"
        done
    done
    for b in "${bins[@]}"; do
        # shellcheck disable=SC2086
        printf "%-26s %10.2f %10.2f %10.2f\n" "$b, $mode, median" "$(median ${tr[$b]})" \
            "$(median ${ev[$b]})" "$(median ${bo[$b]})"
    done
    if [ -n "$base" ]; then
        # shellcheck disable=SC2086
        python3 -c "print('$mode: this build takes %.2fx the base epoch (training plus evaluation), %.2fx its evaluation' % ($(median ${bo[this]}) / $(median ${bo[base]}), $(median ${ev[this]}) / $(median ${ev[base]})))"
    fi
    unset tr ev bo
done
