#!/usr/bin/env bash
# cli_usage.sh - the saga command line's contract: help, version, exit codes 0/1/2, error
# messages that name the file and line, --json (last stdout line is one JSON object), --quiet.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

commands=(info convert generate pagerank)

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
for o in "--damping D" "--tol T" "--max-iters N" "--top K" "--out FILE" "--allow-unconverged" \
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
[ "$(json_get 'j["file"]')" = "$weird" ] || fail "file name not escaped: $(json_last)"

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
