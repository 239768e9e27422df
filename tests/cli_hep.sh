#!/usr/bin/env bash
# cli_hep.sh - `saga hep`: generate a few small events, build their graphs, export them as NumPy
# archives read back with Python, train briefly with every sampler (--json), resume from a
# checkpoint, evaluate it on other events, and the errors that name the file and line at fault.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

# ---- generate: same seed, same bytes ------------------------------------------------------
expect 0 "$SAGA_BIN" hep generate -o "$TMP/ev" --events 6 --seed 4 --min-particles 100 \
    --max-particles 300 --json --quiet
[ "$(json_get 'j["events"]')" = 6 ] || fail "generate: $(json_last)"
[ -f "$TMP/ev/event000000006-truth.csv.gz" ] || fail "generate wrote no event000000006"
expect 0 "$SAGA_BIN" hep generate -o "$TMP/ev2" --events 2 --seed 4 --min-particles 100 \
    --max-particles 300 --quiet
cmp -s "$TMP/ev/event000000002-hits.csv.gz" "$TMP/ev2/event000000002-hits.csv.gz" ||
    fail "the same seed wrote different bytes"
# (sed reads to the end: head would make zcat die of SIGPIPE, which pipefail reports)
[ "$(zcat "$TMP/ev/event000000001-hits.csv.gz" | sed -n 1p)" = hit_id,x,y,z,volume_id,layer_id,module_id ] ||
    fail "hits header"

# ---- build --------------------------------------------------------------------------------
expect 0 "$SAGA_BIN" hep build --data "$TMP/ev" --json
for key in construction_efficiency construction_purity edges hits true_edges; do
    [ "$(json_get "'$key' in j")" = True ] || fail "build --json lacks $key: $(json_last)"
done
[ "$(json_get 'j["construction_efficiency"] > 0.95 and 0 < j["construction_purity"] < 1')" = True ] ||
    fail "construction: $(json_last)"
expect_err "construction efficiency"
tail -n 1 "$OUT" >"$TMP/build.json"

# the barrel alone and ideal helices (the events of earlier releases), built as the barrel alone
# (no disk to cross): no end-cap hit, and every true segment built; the default events reach the
# end-caps and cross from the barrel to them
expect 0 "$SAGA_BIN" hep generate -o "$TMP/ev-ideal" --events 3 --seed 4 --min-particles 100 \
    --max-particles 300 --detector barrel --ideal --quiet
expect 0 "$SAGA_BIN" hep build --data "$TMP/ev-ideal" --barrel-only --json
[ "$(json_get 'j["endcap_hits"], j["construction_efficiency"] == 1, j["regions"]["endcap"]["true_segments"]')" = "0 True 0" ] ||
    fail "barrel-only ideal events: $(json_last)"
[ "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); r=j["regions"]; print(j["endcap_hits"] > 0 and r["endcap"]["true_edges"] > 0 and r["crossing"]["true_edges"] > 0)' "$TMP/build.json")" = True ] ||
    fail "default events: no end-cap or crossing segment: $(cat "$TMP/build.json")"

# ---- build --export: one .npz per event and meta.json, as numpy.load and PyG read them -----
expect 0 "$SAGA_BIN" hep build --data "$TMP/ev" --export "$TMP/npz" --json --quiet
[ "$(json_get 'j["export"], len(j["outputs"]), j["outputs"][0].endswith("/event000000001.npz")')" = "$TMP/npz 7 True" ] ||
    fail "build --export: $(json_last)"
[ -f "$TMP/npz/event000000006.npz" ] && [ -f "$TMP/npz/meta.json" ] || fail "export files"
expect 0 "$SAGA_BIN" hep build --data "$TMP/ev" -o "$TMP/npz-o" --quiet
cmp -s "$TMP/npz/event000000003.npz" "$TMP/npz-o/event000000003.npz" ||
    fail "-o and --export wrote different archives"
# The ZIP and .npy headers with the standard library alone: names, dtypes, shapes, and the
# labels and edges counted against what build --json reported.
python3 - "$TMP/npz" "$TMP/build.json" <<'PY' || fail "export: the archives do not read back"
import array, ast, json, sys, zipfile
d, build = sys.argv[1], json.load(open(sys.argv[2]))
meta = json.load(open(f"{d}/meta.json"))
assert meta["hit_features"] == ["r/1000", "phi/pi", "z/1000"], meta
assert len(meta["edge_features"]) == 11 and meta["build"]["pt_min"] == 1, meta
assert [e["file"] for e in meta["events"]] == [f"event{i:09d}.npz" for i in range(1, 7)], meta
want = {"x": ("<f4", 2), "edge_index": ("<i8", 2), "edge_attr": ("<f4", 2), "y": ("<f4", 1),
        "hit_particle": ("<i8", 1), "hit_pt": ("<f4", 1)}
hits = edges = true = 0
for ev in meta["events"]:
    z = zipfile.ZipFile(f"{d}/{ev['file']}")
    assert z.testzip() is None
    assert z.namelist() == [k + ".npy" for k in want], z.namelist()
    a = {}
    for k, (descr, ndim) in want.items():
        b = z.read(k + ".npy")
        assert b[:8] == b"\x93NUMPY\x01\x00", b[:8]
        hl = 10 + int.from_bytes(b[8:10], "little")
        assert hl % 64 == 0 and b[hl - 1:hl] == b"\n"
        h = ast.literal_eval(b[10:hl].decode("latin1"))
        assert h["descr"] == descr and h["fortran_order"] is False and len(h["shape"]) == ndim, h
        v = array.array("f" if descr == "<f4" else "q")
        v.frombytes(b[hl:])
        n = 1
        for s in h["shape"]:
            n *= s
        assert len(v) == n, (k, h, len(v))
        a[k] = (h["shape"], v)
    n, m = a["x"][0][0], a["y"][0][0]
    assert a["x"][0] == (n, 3) and a["edge_index"][0] == (2, m) and a["edge_attr"][0] == (m, 11)
    assert a["hit_particle"][0] == (n,) and a["hit_pt"][0] == (n,)
    y = a["y"][1]
    assert set(y) <= {0.0, 1.0}
    ei, pid = a["edge_index"][1], a["hit_particle"][1]
    assert all(0 <= i < n for i in ei)
    # a label is 1 exactly when both hits are of one particle and the outer one is on the next
    # of its layers (its layers ordered by the least r of its hits on them). The layer of a hit:
    # a barrel cylinder whose radius its r matches within its length, else the disk at its z.
    barrel = [(32, 500), (72, 500), (116, 500), (172, 500), (260, 1100), (360, 1100),
              (500, 1100), (660, 1100), (820, 1100), (1020, 1100)]
    xs = a["x"][1]
    def layer_of(i):
        r, z = 1000 * xs[3 * i], 1000 * xs[3 * i + 2]
        for l, (rl, half) in enumerate(barrel):
            if abs(r - rl) < 0.5 and abs(z) < half + 10:
                return l
        return ("disk", round(z))
    layer = [layer_of(i) for i in range(n)]
    first_r = {}
    for i in range(n):
        key = (pid[i], layer[i])
        first_r[key] = min(first_r.get(key, xs[3 * i]), xs[3 * i])
    place = {}
    for p_ in set(pid):
        mine = sorted((r, str(l), l) for (q, l), r in first_r.items() if q == p_)
        for k, (_, _, l) in enumerate(mine):
            place[(p_, l)] = k
    def consecutive(u, v):
        return place[(pid[v], layer[v])] == place[(pid[u], layer[u])] + 1
    assert all((y[k] == 1) == (pid[ei[k]] != 0 and pid[ei[k]] == pid[ei[m + k]] and
                               consecutive(ei[k], ei[m + k])) for k in range(m))
    # an edge runs outwards, between two layers
    assert all(xs[3 * ei[k]] < xs[3 * ei[m + k]] and layer[ei[k]] != layer[ei[m + k]]
               for k in range(m))
    assert any(isinstance(l, tuple) for l in layer), "no end-cap hit in the graphs"
    assert (n, m, int(sum(y))) == (ev["hits"], ev["edges"], ev["true_edges"]), ev
    hits, edges, true = hits + n, edges + m, true + int(sum(y))
assert (hits, edges, true) == (build["hits"], build["edges"], build["true_edges"]), build
assert (meta["hits"], meta["edges"], meta["true_edges"]) == (hits, edges, true), meta
PY
# numpy.load itself (Debian: python3-numpy; PYTHON names another interpreter)
py=${PYTHON:-}
if [ -z "$py" ]; then # the python3 on the PATH, else the system's, whichever has numpy
    py=python3
    for c in python3 /usr/bin/python3; do
        if "$c" -c 'import numpy' 2>/dev/null; then
            py=$c
            break
        fi
    done
fi
if "$py" -c 'import numpy' 2>/dev/null; then
    "$py" - "$TMP/npz" "$TMP/build.json" <<'PY' || fail "export: numpy.load disagrees"
import json, sys
import numpy as np
d, build = sys.argv[1], json.load(open(sys.argv[2]))
m = t = 0
for i in range(1, 7):
    a = np.load(f"{d}/event{i:09d}.npz")
    x, ei, ea, y = a["x"], a["edge_index"], a["edge_attr"], a["y"]
    assert x.dtype == np.float32 and x.shape[1] == 3 and x.flags.c_contiguous
    assert ei.dtype == np.int64 and ei.shape == (2, y.shape[0]) and ea.shape == (y.shape[0], 11)
    assert y.dtype == np.float32 and ea.dtype == np.float32
    assert a["hit_particle"].dtype == np.int64 and a["hit_pt"].shape == (x.shape[0],)
    assert ((a["hit_pt"] > 0) == (a["hit_particle"] != 0)).all()
    # edges run outwards: inner hit, then outer, by the r feature
    assert (x[ei[0], 0] < x[ei[1], 0]).all()
    m, t = m + y.shape[0], t + int(y.sum())
assert (m, t) == (build["edges"], build["true_edges"]), (m, t, build)
PY
elif [ "${CI:-}" = true ]; then
    fail "$py cannot import numpy (Debian: python3-numpy; scripts/install-deps)"
else
    echo "skipped: the numpy.load check ($py cannot import numpy; Debian: python3-numpy)"
fi

# ---- train: every sampler, then resume ------------------------------------------------------
expect 0 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 2 --hidden 8 --iterations 2 \
    --batch-events 2 --sampler all --checkpoint "$TMP/hep.ckpt" --json --quiet
for key in edge_efficiency edge_purity auc track_efficiency peak_device_bytes epoch_seconds; do
    [ "$(json_get "'$key' in j")" = True ] || fail "train --json lacks $key: $(json_last)"
done
[ "$(json_get '[s["sampler"] for s in j["samplers"]]')" = "['random', 'sorted', 'balanced']" ] ||
    fail "samplers: $(json_last)"
[ "$(json_get 'all(s["peak_device_bytes"] > 0 and s["epoch_seconds"] > 0 for s in j["samplers"])')" = True ] ||
    fail "per-sampler figures: $(json_last)"
[ "$(json_get 'len(set(s["micro_batches"] for s in j["samplers"]))')" = 1 ] ||
    fail "the samplers make different numbers of micro-batches: $(json_last)"
[ "$(json_get 'j["train_events"], j["eval_events"], j["epochs"]')" = "5 1 2" ] ||
    fail "split: $(json_last)"
[ -f "$TMP/hep.ckpt" ] || fail "no checkpoint written"
expect 0 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 3 --hidden 8 --iterations 2 \
    --batch-events 2 --resume "$TMP/hep.ckpt" --checkpoint "$TMP/hep3.ckpt" --json --quiet
[ "$(json_get 'j["start_epoch"], j["epochs"]')" = "2 3" ] || fail "resume: $(json_last)"
# the defaults: one event per step in a random order, the cosine schedule; the epoch's work
[ "$(json_get 'j["sampler"], j["batch_events"], j["lr_schedule"], j["samplers"][0]["micro_batches"]')" = "random 2 cosine 3" ] ||
    fail "defaults: $(json_last)"
[ "$(json_get 'j["samplers"][0]["epoch_gflop"] > 0 and j["samplers"][0]["gflops"] > 0')" = True ] ||
    fail "epoch GFLOP: $(json_last)"
expect 0 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 1 --hidden 8 --iterations 1 --json --quiet
[ "$(json_get 'j["batch_events"], j["samplers"][0]["micro_batches"], j["lr_schedule"]')" = "1 5 cosine" ] ||
    fail "one event per step by default: $(json_last)"
expect 0 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 1 --hidden 8 --iterations 1 \
    --lr-schedule constant --json --quiet
[ "$(json_get 'j["lr_schedule"]')" = constant ] || fail "--lr-schedule constant: $(json_last)"
expect 2 "$SAGA_BIN" hep train --data "$TMP/ev" --lr-schedule step
expect_err "--lr-schedule must be cosine or constant, got 'step'"

# balanced bins by edges + 1.3 * hits: the budget is in those units
expect 0 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 1 --hidden 8 --iterations 1 \
    --batch-events 2 --hit-weight 1.3 --sampler balanced --json --quiet
[ "$(json_get 'j["hit_weight"], j["samplers"][0]["sampler"], j["samplers"][0]["edge_budget"] > j["samplers"][0]["max_batch_edges"]')" = "1.3 balanced True" ] ||
    fail "--hit-weight: $(json_last)"

# ---- through a device budget ----------------------------------------------------------------
# one step over all five training events (--batch-events 5), so that the epoch's loss is that of
# the step's first weights: under a quarter of the in-memory peak the micro-batch does not fit,
# and is streamed by chunks of edges and hits within the budget, to the in-memory loss within
# the bound on adding in other orders; --stream streams it without a budget too
hep_small=(--data "$TMP/ev" --epochs 1 --hidden 8 --iterations 2 --batch-events 5 --json)
expect 0 "$SAGA_BIN" hep train "${hep_small[@]}" --quiet
mem_loss=$(json_get 'j["loss"]')
quarter=$(($(json_get 'j["samplers"][0]["peak_device_bytes"]') / 4))
edges=$(json_get 'j["samplers"][0]["max_batch_edges"]')
for flags in "--device-mem $quarter" "--stream"; do
    expect 0 "$SAGA_BIN" hep train "${hep_small[@]}" $flags
    python3 - "$(json_last)" "$mem_loss" "$quarter" "$edges" "$flags" <<'PY' ||
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["SAGA_SRC_DIR"], "tests"))
import bounds
j, mem, quarter, edges = json.loads(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = j["samplers"][0]
assert s["streamed_batches"] == 1 and s["chunk_rows"] > 0, s
if sys.argv[5] != "--stream":
    assert s["peak_device_bytes"] <= quarter, (s["peak_device_bytes"], quarter)
tol = bounds.hep_loss(8, 2, edges, edges)
assert abs(j["loss"] - mem) <= tol * mem, (j["loss"], mem, tol)
assert 0 <= j["auc"] <= 1, j
PY
        fail "hep train $flags: $(json_last)"
done
expect 2 "$SAGA_BIN" hep build --data "$TMP/ev" --device-mem 1M
expect_err "--device-mem does not apply to 'hep build'"

# ---- eval ---------------------------------------------------------------------------------
expect 0 "$SAGA_BIN" hep eval --data "$TMP/ev2" --checkpoint "$TMP/hep3.ckpt" --hidden 8 \
    --iterations 2 --json
[ "$(json_get 'j["checkpoint_epoch"], 0 <= j["auc"] <= 1, j["events"]')" = "3 True 2" ] ||
    fail "eval: $(json_last)"
expect 1 "$SAGA_BIN" hep eval --data "$TMP/ev2" --checkpoint "$TMP/hep3.ckpt" --hidden 9
expect_err "hep3.ckpt"

# ---- errors -------------------------------------------------------------------------------
expect 2 "$SAGA_BIN" hep
expect 2 "$SAGA_BIN" hep fly
expect_err "unknown subcommand 'fly'"
expect 2 "$SAGA_BIN" hep train --data "$TMP/ev" --sampler greedy
expect_err "--sampler must be"
expect 2 "$SAGA_BIN" hep build --data "$TMP/ev" --epochs 3
expect_err "--epochs does not apply to 'hep build'"
expect 2 "$SAGA_BIN" hep generate --events 2
expect_err "needs -o DIR"
expect 2 "$SAGA_BIN" hep generate -o "$TMP/evx" --detector cone
expect_err "--detector must be full or barrel, got 'cone'"
expect 2 "$SAGA_BIN" hep generate -o "$TMP/evx" --ideal --material 1
expect_err "--ideal sets --material, --hit-efficiency and --doubled"
expect 2 "$SAGA_BIN" hep generate -o "$TMP/evx" --hit-efficiency 0
expect_err "--hit-efficiency must be in (0, 1]"
expect 2 "$SAGA_BIN" hep build --data "$TMP/ev" --max-missing -1
expect_err "--max-missing"
expect 2 "$SAGA_BIN" hep generate -o "$TMP/evx" --max-missing 1
expect_err "--max-missing does not apply to 'hep generate'"
expect 2 "$SAGA_BIN" hep train --data "$TMP/ev" --export "$TMP/npz"
expect_err "--export does not apply to 'hep train'"
expect 2 "$SAGA_BIN" hep build --data "$TMP/ev" --export "$TMP/a" -o "$TMP/b"
expect_err "name two directories"
: >"$TMP/a-file"
expect 1 "$SAGA_BIN" hep build --data "$TMP/ev" --export "$TMP/a-file"
expect_err "$TMP/a-file"
expect 2 "$SAGA_BIN" hep eval --data "$TMP/ev2"
expect_err "needs --checkpoint"
expect 1 "$SAGA_BIN" hep build --data "$TMP/none"
expect_err "$TMP/none"
mkdir -p "$TMP/bad"
cp "$TMP/ev2/"event000000001-* "$TMP/bad/"
zcat "$TMP/ev2/event000000001-hits.csv.gz" | sed '4s/^\([0-9]*\),[^,]*,/\1,oops,/' \
    >"$TMP/bad/event000000001-hits.csv"
rm "$TMP/bad/event000000001-hits.csv.gz"
expect 1 "$SAGA_BIN" hep build --data "$TMP/bad"
expect_err "event000000001-hits.csv:4: expected a finite number in column 'x', found \"oops\""
zcat "$TMP/ev2/event000000001-truth.csv.gz" | cut -d, -f1,3- >"$TMP/bad/event000000001-truth.csv"
rm "$TMP/bad/event000000001-truth.csv.gz"
zcat "$TMP/ev2/event000000001-hits.csv.gz" >"$TMP/bad/event000000001-hits.csv"
expect 1 "$SAGA_BIN" hep build --data "$TMP/bad"
expect_err "event000000001-truth.csv:1: expected a column named 'particle_id'"

expect 0 "$SAGA_BIN" hep --help
expect_out "generate|build|train|eval"
finish
