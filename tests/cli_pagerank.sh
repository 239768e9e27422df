#!/usr/bin/env bash
# cli_pagerank.sh - `saga pagerank` against the reference top-20 tables of the real datasets, the
# same scores for any thread count, and --out.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

dataset karate karate/edges.txt
dataset karate_ref karate/reference_pagerank_top20.tsv
dataset email email-Eu-core/email-Eu-core.txt.gz
dataset email_ref email-Eu-core/reference_pagerank_top20.tsv
dataset grqc ca-GrQc/ca-GrQc.txt.gz
dataset grqc_ref ca-GrQc/reference_pagerank_top20.tsv
dataset slashdot soc-Slashdot0902/soc-Slashdot0902.txt.gz
dataset slashdot_ref soc-Slashdot0902/reference_pagerank_top20.tsv

# compare NAME REF: the last stdout line's top 20 against the reference table: the same ids in
# the same order (two ids may swap only when the reference scores them within 1e-12), and the sum
# of |score - reference| over the 20 at most 1e-9.
compare() {
    json_last | python3 -c '
import json, sys
name, ref_path = sys.argv[1], sys.argv[2]
j = json.loads(sys.stdin.read())
ref = []
for line in open(ref_path):
    if line.startswith("#") or not line.strip():
        continue
    rank, vid, score = line.split()
    ref.append((int(vid), float(score)))
ref_score = dict(ref)
top = [(t["id"], t["score"]) for t in j["top"]]
ok = len(top) == len(ref) == 20 and j["converged"]
for i, ((gid, gs), (rid, rs)) in enumerate(zip(top, ref)):
    if gid != rid and abs(ref_score.get(gid, gs) - rs) > 1e-12:
        print(f"{name}: rank {i + 1} is {gid}, reference {rid}")
        ok = False
err = sum(abs(gs - rs) for (_, gs), (_, rs) in zip(top, ref))
iters, ms = j["iterations"], j["seconds_per_iteration"] * 1e3
print(f"{name}: {iters} iterations, {ms:.3f} ms each, top-20 L1 error {err:.2e}")
if err > 1e-9:
    ok = False
sys.exit(0 if ok else 1)
' "$1" "$2" || fail "$1: top 20 differs from $2"
}

expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --top 20 --undirected "$karate"
compare karate "$karate_ref"
# --explain: the plan on stderr
expect 0 "$SAGA_BIN" pagerank --top 0 --undirected --explain --device cpu "$karate"
expect_err "net: in memory; 34 vertices"
expect_err "PageRank in f64 over 1 part"
expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --top 20 "$email"
compare email-Eu-core "$email_ref"
expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --top 20 "$grqc"
compare ca-GrQc "$grqc_ref"
expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --top 20 "$slashdot"
compare soc-Slashdot0902 "$slashdot_ref"
json_get '[t["score"] for t in j["top"]]' >"$TMP/slashdot.default"

# The .sgr conversion ranks the same; so does one thread (bit for bit).
expect 0 "$SAGA_BIN" convert --quiet "$slashdot" "$TMP/slashdot.sgr"
OMP_NUM_THREADS=1 expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --top 20 "$TMP/slashdot.sgr"
compare soc-Slashdot0902.sgr "$slashdot_ref"
json_get '[t["score"] for t in j["top"]]' >"$TMP/slashdot.one"
cmp -s "$TMP/slashdot.default" "$TMP/slashdot.one" || fail "one thread gives different scores"
OMP_NUM_THREADS=3 expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --top 20 "$slashdot"
json_get '[t["score"] for t in j["top"]]' >"$TMP/slashdot.three"
cmp -s "$TMP/slashdot.default" "$TMP/slashdot.three" || fail "three threads give different scores"

# Every --order ranks the same within the reference's bound, and --explain names the order.
for order in out-degree graph; do
    expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --top 20 --order $order --explain "$slashdot"
    compare "soc-Slashdot0902 --order $order" "$slashdot_ref"
    if [ $order = graph ]; then
        grep -q "rows by" "$ERR" && fail "--order graph: $(grep "rows by" "$ERR")"
    else
        expect_err "rows by out-degree"
    fi
done
expect 0 "$SAGA_BIN" pagerank --top 0 --explain --device cpu "$karate"
expect_err "rows by in-degree group, then out-degree"
expect 2 "$SAGA_BIN" pagerank --order sideways "$karate"
expect_err "--order must be auto, degree, out-degree or graph, got 'sideways'"

# --undirected on a directed .sgr: the undirected graph of the text path, so the same scores bit
# for bit (before, the .sgr stayed directed and another vertex came first: 1, not 160). Without
# options the .sgr ranks as the directed text file does.
expect 0 "$SAGA_BIN" convert --quiet "$email" "$TMP/email.sgr"
expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --top 20 --undirected "$email"
json_get '[(t["id"], t["score"]) for t in j["top"]], j["edges"]' >"$TMP/email.undirected.text"
expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --top 20 --undirected "$TMP/email.sgr"
json_get '[(t["id"], t["score"]) for t in j["top"]], j["edges"]' >"$TMP/email.undirected.sgr"
cmp -s "$TMP/email.undirected.text" "$TMP/email.undirected.sgr" ||
    fail "pagerank --undirected email.sgr: $(head -c 200 "$TMP/email.undirected.sgr"), the text file: $(head -c 200 "$TMP/email.undirected.text")"
[ "$(json_get 'j["top"][0]["id"], j["edges"]')" = "160 32770" ] ||
    fail "pagerank --undirected email.sgr: $(json_last)"
expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --top 20 "$TMP/email.sgr"
compare email-Eu-core.sgr "$email_ref"
# an option the .sgr cannot honour is refused, not ignored
expect 0 "$SAGA_BIN" convert --quiet --self-loops drop "$email" "$TMP/email-noloops.sgr"
expect 1 "$SAGA_BIN" pagerank --self-loops keep "$TMP/email-noloops.sgr"
expect_err "email-noloops.sgr holds a directed graph (self-loops dropped"
expect_err "--self-loops keep cannot be applied"

# Through the executor: in memory, and streamed under a budget a quarter and a sixteenth of what
# it needs in memory: the reference ranking, the same scores within 1e-12, the peak within budget.
expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --top 20 --device cpu --out "$TMP/sd.mem" "$email"
compare email-Eu-core-executor "$email_ref"
peak=$(json_get 'j["peak_device_bytes"]')
for over in 4 16; do
    budget=$((peak / over))
    expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --top 20 --device-mem "$budget" \
        --out "$TMP/sd.$over" --explain "$email"
    compare "email-Eu-core-streamed-1/$over" "$email_ref"
    expect_err "each part's rows by in-degree group, then out-degree"
    json_get "j['streamed'] and j['parts'] > 1 and j['peak_device_bytes'] <= $budget" | grep -qx True ||
        fail "streamed 1/$over: not streamed within $budget bytes"
    python3 - "$TMP/sd.mem" "$TMP/sd.$over" <<'PY' || fail "streamed 1/$over: scores differ"
import os, sys
sys.path.insert(0, os.path.join(os.environ["SAGA_SRC_DIR"], "tests"))
import bounds  # tests/bounds.py: bounds from the arithmetic
a = [float(l.split()[1]) for l in open(sys.argv[1])]
b = [float(l.split()[1]) for l in open(sys.argv[2])]
tol = bounds.pagerank(len(a))
conv = bounds.pagerank_converged(1e-12)  # both ran with --tol 1e-12
assert len(a) == len(b) and all(abs(x - y) <= tol * x + conv for x, y in zip(a, b)), tol
PY
done

# The human table and --out: every vertex once, in original-id order, scores summing to 1.
expect 0 "$SAGA_BIN" pagerank --undirected --top 3 --out "$TMP/karate.scores" "$karate"
expect_out "rank"
grep -Eq '^1 +33 +0\.1009191' "$OUT" || fail "karate rank 1 should be vertex 33: $(cat "$OUT")"
grep -Eq '^2 +0 +0\.0969972' "$OUT" || fail "karate rank 2 should be vertex 0"
python3 - "$TMP/karate.scores" <<'PY' || fail "karate --out file is wrong"
import sys
rows = [line.split() for line in open(sys.argv[1])]
ids = [int(r[0]) for r in rows]
assert ids == list(range(34)), ids
total = sum(float(r[1]) for r in rows)
assert abs(total - 1) < 1e-12, total
assert abs(float(rows[33][1]) - 1.009191823085181e-01) < 1e-9, rows[33]
PY
expect 0 "$SAGA_BIN" pagerank --quiet --out "$TMP/grqc.scores" "$grqc"
[ "$(wc -l <"$TMP/grqc.scores")" -eq 5242 ] || fail "ca-GrQc --out should list 5242 vertices"
sort -n -c "$TMP/grqc.scores" || fail "ca-GrQc --out is not in id order"
[ "$(head -c 3 "$TMP/grqc.scores")" = "13 " ] || fail "ca-GrQc --out should start at id 13"

finish
