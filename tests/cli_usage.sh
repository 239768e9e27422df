#!/usr/bin/env bash
# cli_usage.sh - the saga command line's contract: help, version, exit codes 0/1/2, error
# messages that name the file and line, --json (last stdout line is one JSON object), --quiet.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

commands=(info convert generate pagerank cc partition gcn hep mlp)

# ---- help and version --------------------------------------------------------------------------
expect 0 "$SAGA_BIN" --help
for c in "${commands[@]}"; do expect_out "  $c"; done
expect 0 "$SAGA_BIN" --version
grep -Eq '^saga [0-9]+\.[0-9]+\.[0-9]+$' "$OUT" || fail "--version printed '$(cat "$OUT")'"
expect 2 "$SAGA_BIN"
expect_err "usage: saga"
expect 0 "$SAGA_BIN" help
expect_out "usage: saga"
for c in "${commands[@]}"; do
    expect 0 "$SAGA_BIN" "$c" --help
    expect_out "usage: saga $c"
    expect_out "--quiet"
    expect_out "--json"
    expect_out "example:"
    cp "$OUT" "$TMP/help-$c"
    expect 0 "$SAGA_BIN" help "$c"
    cmp -s "$OUT" "$TMP/help-$c" || fail "'saga help $c' differs from 'saga $c --help'"
    expect 0 "$SAGA_BIN" "$c" -h
done
# Every option of pagerank is documented with its default.
expect 0 "$SAGA_BIN" pagerank --help
for o in "--damping D" "--tol T" "--max-iters N" "--top K" "--output FILE" "--allow-unconverged" \
    "--format FMT" "--undirected" "--self-loops" "--duplicates" "--weights"; do
    expect_out "$o"
done
for d in "(default: 0.85)" "(default: 1e-10)" "(default: 1000)" "(default: 10)" "weights are ignored"; do
    grep -qiF -- "$d" "$OUT" || fail "pagerank --help lacks '$d'"
done

# ---- usage errors: exit 2 with a one-line reason and a pointer to the help ------------------------
printf '0 1\n1 2\n2 0\n2 3\n' >"$TMP/small.txt"
expect 2 "$SAGA_BIN" frobnicate
expect_err "'frobnicate' is not a saga command"
expect 2 "$SAGA_BIN" help frobnicate
expect 2 "$SAGA_BIN" --bogus
expect 2 "$SAGA_BIN" info --bogus "$TMP/small.txt"
expect_err "saga info: unknown option '--bogus'"
expect_err "see 'saga info --help'"
expect 2 "$SAGA_BIN" info --bogus=3 "$TMP/small.txt"
expect_err "unknown option '--bogus'"
expect 2 "$SAGA_BIN" pagerank -Z "$TMP/small.txt"
expect_err "unknown option '-Z'"
expect 2 "$SAGA_BIN" info --quiet=yes "$TMP/small.txt"
expect_err "takes no value"
expect 2 "$SAGA_BIN" info
expect_err "saga info: missing FILE"
expect 2 "$SAGA_BIN" info "$TMP/small.txt" extra
expect_err "unexpected argument 'extra'"
expect 2 "$SAGA_BIN" convert "$TMP/small.txt"
expect_err "see 'saga convert --help'"
expect 2 "$SAGA_BIN" convert "$TMP/small.txt" "$TMP/out.txt"
expect_err "must end in .sgr"
expect 2 "$SAGA_BIN" pagerank "$TMP/small.txt" --damping
expect_err "option '--damping' needs a value"
for bad in "--damping 1" "--damping -0.1" "--damping x" "--tol 0" "--tol -1" "--max-iters 0" \
    "--top -1" "--top 3.5" "--format csv" "--self-loops maybe" "--duplicates some" "--weights x"; do
    # shellcheck disable=SC2086
    expect 2 "$SAGA_BIN" pagerank "$TMP/small.txt" $bad
    expect_err "see 'saga pagerank --help'"
done
expect 2 "$SAGA_BIN" generate rmat --scale 4
expect_err "missing -o FILE"
expect 2 "$SAGA_BIN" generate kronecker -o "$TMP/g.txt"
expect_err "unknown generator 'kronecker'"
expect 2 "$SAGA_BIN" generate rmat --scale 31 -o "$TMP/g.txt"
expect 2 "$SAGA_BIN" generate rmat --a 0.7 --b 0.2 --c 0.2 -o "$TMP/g.txt"
[ ! -e "$TMP/g.txt" ] || fail "a usage error still wrote $TMP/g.txt"

# ---- errors: exit 1, "saga: " and a message naming the file (and the line) -----------------------
expect 1 "$SAGA_BIN" info "$TMP/no-such-file.txt"
expect_err "saga: "
expect_err "no-such-file.txt"
expect 1 "$SAGA_BIN" pagerank "$TMP/no-such-file.txt"
expect_err "no-such-file.txt"
expect 1 "$SAGA_BIN" convert "$TMP/no-such-file.txt" "$TMP/x.sgr"
expect_err "no-such-file.txt"
mkdir -p "$TMP/a-directory"
expect 1 "$SAGA_BIN" info "$TMP/a-directory"
expect_err "a-directory"
printf '0 1\n1 2\nfoo bar\n' >"$TMP/bad.txt"
expect 1 "$SAGA_BIN" info "$TMP/bad.txt"
expect_err "bad.txt:3"
[ "$(wc -l <"$ERR")" -eq 1 ] || fail "a load error printed more than one line"
[ ! -s "$OUT" ] || fail "a failed info printed on stdout"
expect 1 "$SAGA_BIN" generate rmat --scale 4 -o "$TMP/no-such-dir/g.txt"
expect_err "no-such-dir/g.txt"
expect 1 "$SAGA_BIN" pagerank "$TMP/small.txt" --max-iters 2
expect_err "did not converge in 2 iterations"
expect_err "L1 change"
expect 0 "$SAGA_BIN" pagerank "$TMP/small.txt" --max-iters 2 --allow-unconverged
expect_err "warning"

# ---- --json: the last line on stdout is one JSON object with the results -------------------------
expect 0 "$SAGA_BIN" info --json "$TMP/small.txt"
[ "$(json_get 'j["vertices"], j["edges"], j["format"], j["dangling"], j["in_degree"]["max"]')" = \
    "4 4 edgelist 1 1" ] || fail "info --json: $(json_last)"
for k in weighted self_loops duplicates isolated dangling in_degree out_degree load_seconds \
    load_mb_per_s; do
    [ "$(json_get "'$k' in j")" = True ] || fail "info --json lacks '$k'"
done
grep -q '^file ' "$ERR" || fail "info --json should move the human text to stderr"

expect 0 "$SAGA_BIN" pagerank --json --top 2 "$TMP/small.txt"
[ "$(json_get 'j["converged"], len(j["top"]), sorted(j["top"][0].keys())')" = \
    "True 2 ['id', 'rank', 'score']" ] || fail "pagerank --json: $(json_last)"
for k in iterations seconds_per_iteration l1_change; do
    [ "$(json_get "'$k' in j")" = True ] || fail "pagerank --json lacks '$k'"
done
# Scores of small.txt: vertex 2 first, then 1, then 0 and 3 tied (broken by the smaller id).
expect 0 "$SAGA_BIN" pagerank --json --top 10 --tol 1e-13 "$TMP/small.txt"
[ "$(json_get '[t["id"] for t in j["top"]], round(j["top"][0]["score"], 9)')" = \
    "[2, 1, 0, 3] 0.307853403" ] || fail "pagerank ranking of small.txt: $(json_last)"

expect 0 "$SAGA_BIN" convert --json "$TMP/small.txt" "$TMP/small.sgr"
[ "$(json_get 'j["vertices"], j["edges"], j["output_bytes"] > 0')" = "4 4 True" ] ||
    fail "convert --json: $(json_last)"
expect 0 "$SAGA_BIN" generate rmat --json --scale 5 --edge-factor 3 -o "$TMP/g5.txt"
[ "$(json_get 'j["vertices"], j["edges"], j["seed"], j["scramble"]')" = "32 96 1 True" ] ||
    fail "generate --json: $(json_last)"

# Names with quotes, backslashes and spaces are escaped.
weird=$TMP/'we"ird \name.txt'
cp "$TMP/small.txt" "$weird"
expect 0 "$SAGA_BIN" info --json "$weird"
[ "$(json_get 'j["input"]')" = "$weird" ] || fail "file name not escaped: $(json_last)"

# ---- one vocabulary: -o/--output for what a command writes, --threads, --device, --parts ----------
writers=(convert pagerank cc partition generate hep)
computers=(info convert generate pagerank cc partition gcn hep mlp)
devices=(pagerank cc gcn hep mlp)
for c in "${computers[@]}"; do
    expect 0 "$SAGA_BIN" "$c" --help
    expect_out "--threads N"
done
for c in "${writers[@]}"; do
    expect 0 "$SAGA_BIN" "$c" --help
    expect_out "-o, --output"
done
for c in "${devices[@]}"; do
    expect 0 "$SAGA_BIN" "$c" --help
    expect_out "--device DEV"
done
for c in partition gcn pagerank cc; do # a partition's and a streamed run's cut: the same words
    expect 0 "$SAGA_BIN" "$c" --help
    expect_out "--parts K"
    expect_out "--partition METHOD"
done
# the older spellings are named as such (the help wraps its lines)
expect 0 "$SAGA_BIN" pagerank --help
tr -s ' \n' ' ' <"$OUT" | grep -qF -- "--out is an older spelling" || fail "pagerank --help: --out"
expect 0 "$SAGA_BIN" partition --help
tr -s ' \n' ' ' <"$OUT" | grep -qF -- "--method is an older spelling" ||
    fail "partition --help: --method"

# -o/--output and the old spellings write the same file
for o in -o --output --out; do
    rm -f "$TMP/pr$o.txt"
    expect 0 "$SAGA_BIN" pagerank "$TMP/small.txt" "$o" "$TMP/pr$o.txt" --quiet
    [ "$(wc -l <"$TMP/pr$o.txt" 2>/dev/null)" = 4 ] || fail "pagerank $o did not write the scores"
    rm -f "$TMP/cc$o.txt"
    expect 0 "$SAGA_BIN" cc "$TMP/small.txt" "$o" "$TMP/cc$o.txt" --quiet
    [ "$(wc -l <"$TMP/cc$o.txt" 2>/dev/null)" = 4 ] || fail "cc $o did not write the components"
    rm -f "$TMP/parts$o.txt"
    expect 0 "$SAGA_BIN" partition "$TMP/small.txt" --parts 2 "$o" "$TMP/parts$o.txt" --quiet
    [ "$(wc -l <"$TMP/parts$o.txt" 2>/dev/null)" = 4 ] || fail "partition $o did not write the parts"
done
cmp -s "$TMP/pr-o.txt" "$TMP/pr--out.txt" || fail "pagerank -o and --out wrote different files"
expect 0 "$SAGA_BIN" convert "$TMP/small.txt" -o "$TMP/o1.sgr" --quiet
expect 0 "$SAGA_BIN" convert "$TMP/small.txt" --output "$TMP/o2.sgr" --quiet
expect 0 "$SAGA_BIN" convert "$TMP/small.txt" "$TMP/o3.sgr" --quiet
cmp -s "$TMP/o1.sgr" "$TMP/o2.sgr" && cmp -s "$TMP/o1.sgr" "$TMP/o3.sgr" ||
    fail "convert -o, --output and a second argument wrote different files"
expect 2 "$SAGA_BIN" convert "$TMP/small.txt" "$TMP/o4.sgr" -o "$TMP/o5.sgr"
expect_err "give the output once"
expect 2 "$SAGA_BIN" convert "$TMP/small.txt"
expect_err "missing -o OUT.sgr"
# --parts/-k and --partition/--method: the same cut
expect 0 "$SAGA_BIN" partition "$TMP/small.txt" --parts 2 --partition random --seed 3 -o "$TMP/p1.txt" -q
expect 0 "$SAGA_BIN" partition "$TMP/small.txt" -k 2 --method random --seed 3 -o "$TMP/p2.txt" -q
cmp -s "$TMP/p1.txt" "$TMP/p2.txt" || fail "--parts/--partition and -k/--method cut differently"
expect 2 "$SAGA_BIN" partition "$TMP/small.txt" --parts 2 --partition spectral
expect_err "--partition must be metis, contiguous, random or fennel"
# --threads N: OpenMP's count, reported as "threads" in the JSON object
for c in "info" "convert -o $TMP/t.sgr" "pagerank" "cc" "partition --parts 2"; do
    # shellcheck disable=SC2086
    expect 0 "$SAGA_BIN" $c "$TMP/small.txt" --threads 1 --json --quiet
    [ "$(json_get 'j["threads"]')" = 1 ] || fail "$c --threads 1: $(json_last)"
done
expect 0 "$SAGA_BIN" generate rmat --scale 4 -o "$TMP/t.txt" --threads 1 --json --quiet
[ "$(json_get 'j["threads"]')" = 1 ] || fail "generate --threads 1: $(json_last)"
expect 0 "$SAGA_BIN" gcn --synthetic 200,4,16,2 --epochs 2 --device cpu --threads 1 --json --quiet
[ "$(json_get 'j["threads"]')" = 1 ] || fail "gcn --threads 1: $(json_last)"
expect 0 "$SAGA_BIN" mlp --layers 2 --width 8 --outputs 2 --batch 8 --micro-batches 2 --steps 2 \
    --device-mem 1M --device cpu --threads 1 --json --quiet
[ "$(json_get 'j["threads"]')" = 1 ] || fail "mlp --threads 1: $(json_last)"
expect 2 "$SAGA_BIN" info "$TMP/small.txt" --threads 0
expect_err "--threads must be an integer in 1..4096"

# ---- --json keys: the same name for the same thing in every command -----------------------------
# input (the path read), load_seconds, device and threads, outputs (the files written, a list)
expect 0 "$SAGA_BIN" info --json "$TMP/small.txt"
[ "$(json_get 'j["input"], "load_seconds" in j, j["device"], j["outputs"]')" = \
    "$TMP/small.txt True cpu []" ] || fail "info --json keys: $(json_last)"
expect 0 "$SAGA_BIN" convert --json "$TMP/small.txt" -o "$TMP/k.sgr"
[ "$(json_get 'j["input"], "load_seconds" in j, j["device"], j["outputs"]')" = \
    "$TMP/small.txt True cpu ['$TMP/k.sgr']" ] || fail "convert --json keys: $(json_last)"
for c in pagerank cc "partition --parts 2"; do
    # shellcheck disable=SC2086
    expect 0 "$SAGA_BIN" $c --json "$TMP/small.txt" -o "$TMP/k.txt"
    [ "$(json_get 'j["input"], "load_seconds" in j, j["device"], j["outputs"]')" = \
        "$TMP/small.txt True cpu ['$TMP/k.txt']" ] || fail "$c --json keys: $(json_last)"
done
expect 0 "$SAGA_BIN" generate rmat --json --scale 4 -o "$TMP/k4.txt"
[ "$(json_get 'j["device"], j["outputs"]')" = "cpu ['$TMP/k4.txt']" ] ||
    fail "generate rmat --json keys: $(json_last)"
expect 0 "$SAGA_BIN" generate citation --json --vertices 100 --classes 2 --features 20 -o "$TMP/kc"
[ "$(json_get 'j["device"], len(j["outputs"])')" = "cpu 8" ] ||
    fail "generate citation --json keys: $(json_last)"
files=$(json_get '"\n".join(j["outputs"])' 2>/dev/null) || files=""
while read -r f; do
    [ -n "$f" ] && [ -f "$f" ] || fail "generate citation lists '$f', which it did not write"
done <<<"$files"
expect 0 "$SAGA_BIN" gcn --json --data "$TMP/kc" --epochs 3 --log "$TMP/kc.jsonl" --device cpu
[ "$(json_get 'j["input"], "load_seconds" in j, j["device"], j["outputs"]')" = \
    "$TMP/kc True cpu ['$TMP/kc.jsonl']" ] || fail "gcn --json keys: $(json_last)"
python3 - "$TMP/kc.jsonl" "$(json_last)" <<'PY' || fail "gcn --log and --json name an epoch's figures apart"
import json, sys
last = [json.loads(l) for l in open(sys.argv[1])][-1]
j = json.loads(sys.argv[2])
keys = ("loss", "train_accuracy", "val_accuracy", "test_accuracy")
assert all(last[k] == j[k] for k in keys), (last, j)
PY
expect 0 "$SAGA_BIN" hep generate --json -o "$TMP/ev" --events 2 --min-particles 5 --max-particles 10
[ "$(json_get 'j["device"], len(j["outputs"])')" = "cpu 6" ] || fail "hep generate --json: $(json_last)"
files=$(json_get '"\n".join(j["outputs"])' 2>/dev/null) || files=""
while read -r f; do
    [ -n "$f" ] && [ -f "$f" ] || fail "hep generate lists '$f', which it did not write"
done <<<"$files"
expect 0 "$SAGA_BIN" hep build --json --data "$TMP/ev"
[ "$(json_get 'j["input"], "load_seconds" in j, j["device"], j["outputs"]')" = \
    "$TMP/ev True cpu []" ] || fail "hep build --json keys: $(json_last)"
expect 0 "$SAGA_BIN" mlp --json --layers 2 --width 8 --outputs 2 --batch 8 --micro-batches 2 \
    --steps 2 --device-mem 1M --device cpu
[ "$(json_get 'j["device"], j["outputs"]')" = "cpu []" ] || fail "mlp --json keys: $(json_last)"

# On a failure, --json ends stdout with {"error", "status", "exit_code"}; the message stays on
# stderr and the exit code is unchanged. (json_error CODE STATUS CMD...)
json_error() {
    local code=$1 status=$2
    shift 2
    expect "$code" "$@"
    [ -s "$ERR" ] || fail "'$*': no message on stderr"
    json_last | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
assert set(j) == {"error", "status", "exit_code"}, j
assert j["error"] and j["status"] == sys.argv[1] and j["exit_code"] == int(sys.argv[2]), j
' "$status" "$code" || fail "'$*': no error object: $(json_last)"
}
json_error 1 SAGA_ERR_IO "$SAGA_BIN" info --json "$TMP/no-such-file.txt"
grep -qF "no-such-file.txt" "$OUT" || fail "the error object does not name the file"
json_error 1 SAGA_ERR_PARSE "$SAGA_BIN" info --json "$TMP/bad.txt"
[ "$(wc -l <"$OUT")" -eq 1 ] || fail "a failed info --json printed more than the error object"
json_error 2 SAGA_ERR_INVALID_ARG "$SAGA_BIN" info --bogus --json "$TMP/small.txt"
json_error 2 SAGA_ERR_INVALID_ARG "$SAGA_BIN" frobnicate --json
json_error 1 SAGA_ERR_IO "$SAGA_BIN" convert --json "$TMP/no-such-file.txt" -o "$TMP/x.sgr"
json_error 2 SAGA_ERR_INVALID_ARG "$SAGA_BIN" convert --json "$TMP/small.txt" -o "$TMP/x.txt"
json_error 1 SAGA_ERR_PARSE "$SAGA_BIN" pagerank --json "$TMP/bad.txt"
json_error 1 SAGA_ERR_NOT_CONVERGED "$SAGA_BIN" pagerank --json "$TMP/small.txt" --max-iters 2
json_error 1 SAGA_ERR_IO "$SAGA_BIN" cc --json "$TMP/no-such-file.txt"
json_error 1 SAGA_ERR_INVALID_ARG "$SAGA_BIN" partition --json "$TMP/small.txt" --parts 5
json_error 2 SAGA_ERR_INVALID_ARG "$SAGA_BIN" partition --json "$TMP/small.txt"
json_error 1 SAGA_ERR_IO "$SAGA_BIN" generate rmat --json --scale 4 -o "$TMP/no-such-dir/g.txt"
json_error 1 SAGA_ERR_IO "$SAGA_BIN" gcn --json --data "$TMP/no-such-dir"
json_error 2 SAGA_ERR_INVALID_ARG "$SAGA_BIN" gcn --json --epochs 3
json_error 1 SAGA_ERR_IO "$SAGA_BIN" hep build --json --data "$TMP/no-such-dir"
json_error 2 SAGA_ERR_INVALID_ARG "$SAGA_BIN" mlp --json --batch 10 --micro-batches 3

# ---- --quiet: nothing on success; errors still shown ----------------------------------------------
expect 0 "$SAGA_BIN" info --quiet "$TMP/small.txt"
[ ! -s "$OUT" ] && [ ! -s "$ERR" ] || fail "info --quiet printed something"
expect 0 "$SAGA_BIN" pagerank -q "$TMP/small.txt" --out "$TMP/scores.txt"
[ ! -s "$OUT" ] && [ ! -s "$ERR" ] || fail "pagerank --quiet printed something"
[ "$(wc -l <"$TMP/scores.txt")" -eq 4 ] || fail "--out should write 4 lines"
expect 0 "$SAGA_BIN" convert --quiet "$TMP/small.txt" "$TMP/small2.sgr"
[ ! -s "$OUT" ] && [ ! -s "$ERR" ] || fail "convert --quiet printed something"
expect 0 "$SAGA_BIN" generate rmat --quiet --scale 4 -o "$TMP/g4.txt"
[ ! -s "$OUT" ] && [ ! -s "$ERR" ] || fail "generate --quiet printed something"
expect 0 "$SAGA_BIN" info --quiet --json "$TMP/small.txt"
[ "$(wc -l <"$OUT")" -eq 1 ] && [ ! -s "$ERR" ] || fail "--quiet --json should print the JSON only"
expect 1 "$SAGA_BIN" info --quiet "$TMP/bad.txt"
expect_err "bad.txt:3"

finish
