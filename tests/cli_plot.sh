#!/usr/bin/env bash
# saga plot: each kind of picture from the log of a real short run (gcn --log, a streamed gcn's
# --trace, hep eval --log, partition --json), as PNG and SVG of the size asked for; the logs'
# new content (trace lines, hep curve, halos) checked against the runs; the errors.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"
SRC=${SAGA_SRC_DIR:-$(cd "$(dirname "$0")/.." && pwd)}

# The Python that saga plot will use: $SAGA_PYTHON, else the first of python3 and
# /usr/bin/python3 that imports matplotlib.
PY=
for p in ${SAGA_PYTHON:-python3 /usr/bin/python3}; do
    if "$p" -c 'import matplotlib' 2>/dev/null; then
        PY=$p
        break
    fi
done

# ---- usage errors and bad logs need no matplotlib
expect 2 "$SAGA_BIN" plot
expect_err "LOG"
expect 2 "$SAGA_BIN" plot "$TMP/none.jsonl"
expect_err "-o FILE.png or -o FILE.svg is required"
expect 2 "$SAGA_BIN" plot "$TMP/none.jsonl" -o "$TMP/x.gif"
expect_err "-o must name a .png or .svg file, got '$TMP/x.gif'"
expect 2 "$SAGA_BIN" plot "$TMP/none.jsonl" -o "$TMP/x.png" --kind pie
expect_err "--kind must be auto, training, timeline, hep or partition, got 'pie'"
expect 2 "$SAGA_BIN" plot "$TMP/none.jsonl" -o "$TMP/x.png" --width 10
expect_err "--width"
SAGA_PYTHON=$TMP/no-such-python expect 1 "$SAGA_BIN" plot "$TMP/none.jsonl" -o "$TMP/x.png"
expect_err "saga plot needs python3 with matplotlib"
expect 0 "$SAGA_BIN" plot --help
expect_out "gcn --trace"
expect 0 "$SAGA_BIN" --help
expect_out "plot        Draw a run's --log JSON lines"

# ---- the logs, from real runs
# training curves
expect 0 "$SAGA_BIN" gcn --synthetic 600,6,32,4 --epochs 6 --log "$TMP/train.jsonl" -q
[ "$(wc -l <"$TMP/train.jsonl")" -eq 6 ] || fail "gcn --log: expected 6 lines"
# a streamed run's trace: copies and computes, each with its stream, interval and step
expect 0 "$SAGA_BIN" gcn --synthetic 3000,8,64,4 --epochs 2 --device-mem 2M --stats \
    --trace "$TMP/trace.jsonl" --json
[ "$(json_get '"'"$TMP/trace.jsonl"'" in j["outputs"]')" = True ] || fail "--json outputs lack the trace"
python3 - "$TMP/trace.jsonl" <<'PY' || fail "gcn --trace: malformed trace"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
copies = [r for r in rows if r["trace"] == "copy"]
computes = [r for r in rows if r["trace"] == "compute"]
assert copies and computes, (len(copies), len(computes))
assert {r["dir"] for r in copies} <= {"h2d", "d2h"} and any(r["dir"] == "h2d" for r in copies)
for r in rows:
    assert 0 <= r["start"] <= r["end"], r
    assert r["plan"] >= 1 and r["step"] >= -1, r
for r in copies:
    assert r["bytes"] > 0 and r["block"], r
# two epochs of a streamed net: several plans, each with more than one step
plans = {r["plan"] for r in computes}
assert len(plans) >= 4, plans
assert max(r["step"] for r in computes) >= 1
PY
# pagerank streamed: one plan for every iteration
expect 0 "$SAGA_BIN" generate rmat --scale 10 --edge-factor 8 --seed 1 -o "$TMP/r10.txt" -q
expect 0 "$SAGA_BIN" pagerank "$TMP/r10.txt" --device-mem 96K --top 0 --trace "$TMP/pr.jsonl" -q
python3 - "$TMP/pr.jsonl" <<'PY' || fail "pagerank --trace: malformed trace"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
computes = [r for r in rows if r["trace"] == "compute"]
assert len(computes) > 4 and any(r["trace"] == "copy" for r in rows), len(rows)
assert all(0 <= r["start"] <= r["end"] for r in rows)
PY
expect 0 "$SAGA_BIN" gcn --synthetic 3000,8,64,4 --epochs 1 --device-mem 2M -q
expect 2 "$SAGA_BIN" gcn --synthetic 600,6,32,4 --trace
# hep: generate, train, eval with the curve
expect 0 "$SAGA_BIN" hep generate -o "$TMP/ev" --events 6 --min-particles 20 --max-particles 40 -q
expect 0 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 3 --checkpoint "$TMP/hep.ckpt" -q
expect 0 "$SAGA_BIN" hep eval --data "$TMP/ev" --checkpoint "$TMP/hep.ckpt" --log "$TMP/hep.jsonl" \
    --json
cp "$OUT" "$TMP/hep-eval.json"
python3 - "$TMP/hep.jsonl" "$TMP/hep-eval.json" <<'PY' || fail "hep eval --log: curve disagrees"
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ev = json.loads(open(sys.argv[2]).read().splitlines()[-1])
summary, curve = lines[0], lines[1:]
assert summary["auc"] == ev["auc"] and summary["edge_efficiency"] == ev["edge_efficiency"]
assert summary["true_edges"] + summary["false_edges"] == ev["eval_edges"]
assert len(curve) == 101 and curve[0]["threshold"] == 0 and curve[-1]["threshold"] == 1
at = {round(c["threshold"], 2): c for c in curve}
# the curve at the run's threshold is the run's own efficiency and purity
assert math.isclose(at[0.5]["edge_efficiency"], ev["edge_efficiency"], rel_tol=1e-12)
assert math.isclose(at[0.5]["edge_purity"], ev["edge_purity"], rel_tol=1e-12)
eff = [c["edge_efficiency"] for c in curve]
fpr = [c["false_positive_rate"] for c in curve]
assert all(a >= b for a, b in zip(eff, eff[1:])) and all(a >= b for a, b in zip(fpr, fpr[1:]))
assert curve[-1]["edge_purity"] is None and eff[-1] == 0
PY
expect 2 "$SAGA_BIN" hep train --data "$TMP/ev" --log "$TMP/x.jsonl"
expect_err "--log does not apply to 'hep train'"
# partition: sizes and halos, the halos against a count from the edge list and the parts
expect 0 "$SAGA_BIN" generate rmat --scale 9 --edge-factor 4 --seed 3 -o "$TMP/g.txt" -q
expect 0 "$SAGA_BIN" partition "$TMP/g.txt" --parts 5 -o "$TMP/parts.txt" --json
json_last >"$TMP/part.jsonl"
python3 - "$TMP/g.txt" "$TMP/parts.txt" "$TMP/part.jsonl" <<'PY' || fail "partition: halos disagree"
import json, sys
part = {}
for line in open(sys.argv[2]):
    v, q = line.split()
    part[v] = int(q)
j = json.loads(open(sys.argv[3]).read())
k = j["parts"]
halo = [set() for _ in range(k)]
for line in open(sys.argv[1]):
    f = line.split()
    if not f or f[0].startswith(("#", "%")):
        continue
    u, v = f[0], f[1]
    if part[u] != part[v]:
        halo[part[v]].add(u)
want = [len(h) for h in halo]
assert j["halos"] == want, (j["halos"], want)
assert sum(j["sizes"]) == j["vertices"] and len(j["sizes"]) == k
assert any(want), want
PY

# ---- the pictures
if [ -z "$PY" ]; then
    if [ "${CI:-}" = true ]; then
        fail "matplotlib is missing for python3 and /usr/bin/python3 (install python3-matplotlib)"
        finish
    fi
    echo "skipped: the pictures (matplotlib is not installed; apt-get install python3-matplotlib)"
    expect 1 "$SAGA_BIN" plot "$TMP/train.jsonl" -o "$TMP/x.png"
    expect_err "matplotlib is missing"
    finish
    exit 0
fi

# check_image FILE W H: a PNG of W x H pixels (IHDR), or an SVG that parses, W x H at 100 dpi
check_image() {
    "$PY" - "$@" <<'PY' || fail "$1: not a ${2}x${3} image"
import struct, sys, xml.etree.ElementTree as ET
path, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if path.endswith(".png"):
    head = open(path, "rb").read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", head
    got = struct.unpack(">II", head[16:24])
    assert got == (w, h), got
else:
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg"), root.tag
    got = (root.get("width"), root.get("height"))
    assert got == (f"{w * 0.72:g}pt", f"{h * 0.72:g}pt"), got
    assert len(root.iter().__next__()) > 0
PY
}

# each kind as a PNG (auto) and an SVG (named kind, other size); the hep SVG by plot.py itself,
# which runs without saga too
for kind in train:training trace:timeline hep:hep part:partition; do
    log=${kind%%:*}
    want=${kind#*:}
    expect 0 "$SAGA_BIN" plot "$TMP/$log.jsonl" -o "$TMP/$log.png" --json
    [ "$(json_get 'j["kind"]')" = "$want" ] || fail "$log.jsonl: drawn as $(json_get 'j["kind"]'), expected $want"
    check_image "$TMP/$log.png" 960 540
    if [ "$log" = hep ]; then
        expect 0 "$PY" "$SRC/python/saga/plot.py" "$TMP/$log.jsonl" -o "$TMP/$log.svg" \
            --kind "$want" --width 700 --height 400
    else
        expect 0 "$SAGA_BIN" plot "$TMP/$log.jsonl" -o "$TMP/$log.svg" --kind "$want" \
            --width 700 --height 400 --plans 1:2
    fi
    check_image "$TMP/$log.svg" 700 400
done
expect 0 "$SAGA_BIN" plot "$TMP/pr.jsonl" -o "$TMP/pr.png" --json
[ "$(json_get 'j["kind"]')" = timeline ] || fail "pr.jsonl: not drawn as a timeline"
check_image "$TMP/pr.png" 960 540
expect 1 "$SAGA_BIN" plot "$TMP/trace.jsonl" -o "$TMP/x.png" --plans 900:901
expect_err "no trace lines in plans 900..901"

# ---- logs it cannot draw
: >"$TMP/empty.jsonl"
expect 1 "$SAGA_BIN" plot "$TMP/empty.jsonl" -o "$TMP/x.png"
expect_err "empty.jsonl: empty: no JSON lines to plot"
printf '{"epoch": 1, "loss": 1}\nnot json\n' >"$TMP/bad.jsonl"
expect 1 "$SAGA_BIN" plot "$TMP/bad.jsonl" -o "$TMP/x.png"
expect_err "bad.jsonl:2: expected a JSON object"
echo '{"vertices": 3}' >"$TMP/unknown.jsonl"
expect 1 "$SAGA_BIN" plot "$TMP/unknown.jsonl" -o "$TMP/x.png" --json
expect_err "unknown.jsonl: unknown log: line 1 has keys vertices"
[ "$(json_get 'j["exit_code"]')" = 1 ] || fail "--json error object"
expect 1 "$SAGA_BIN" plot "$TMP/train.jsonl" -o "$TMP/x.png" --kind partition
expect_err "no partition lines in it"
expect 1 "$SAGA_BIN" plot "$TMP/missing.jsonl" -o "$TMP/x.png"
expect_err "cannot read '$TMP/missing.jsonl'"
[ ! -e "$TMP/x.png" ] || fail "a failed plot left x.png"

# ---- the unit tests of plot.py
expect 0 "$PY" -m unittest discover -s "$SRC/python/tests" -p test_plot.py
grep -q "^OK" "$ERR" || fail "test_plot.py: $(tail -3 "$ERR")"
finish
