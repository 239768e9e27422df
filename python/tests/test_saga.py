"""The saga package against the `saga` command: the same results from the same library.

Run by the ctest `python` (tests/python.sh) with the package of the build tree on PYTHONPATH, the
command in $SAGA_BIN and the data sets under $SAGA_DATA_DIR (karate, cora)."""

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import saga

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
import bounds  # noqa: E402  tests/bounds.py: bounds from the arithmetic

DATA = os.environ.get("SAGA_DATA_DIR") or os.environ.get("SAGA_DEFAULT_DATA_DIR", "")
SAGA_BIN = os.environ.get("SAGA_BIN")
KARATE = os.path.join(DATA, "karate", "edges.txt")
CORA = os.path.join(DATA, "cora")


def need(path):
    if not os.path.exists(path):
        if os.environ.get("CI") == "true":
            pytest.fail(f"dataset {path} is missing (set SAGA_DATA_DIR)")
        pytest.skip(f"{path} is missing (set SAGA_DATA_DIR)")


def cli(*args):
    if not SAGA_BIN:
        pytest.skip("SAGA_BIN (the saga command) is not set")
    out = subprocess.run([SAGA_BIN, *args, "--json", "--quiet"], check=True,
                         capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "2"})
    return json.loads(out.stdout)


# ---- graphs ---------------------------------------------------------------------------------

def test_edge_index_round_trip():
    rng = np.random.default_rng(7)
    n = 50
    ei = rng.integers(0, n, size=(2, 300))
    g = saga.Graph.from_edge_index(ei, num_nodes=n)
    assert (g.num_nodes, g.num_edges) == (n, 300)
    back = g.edge_index()
    assert back.shape == (2, 300) and back.dtype == np.int64
    # the graph keeps every edge (parallel ones and self-loops too), sorted by source then target
    order = np.lexsort((ei[1], ei[0]))
    assert np.array_equal(back, ei[:, order])
    # and back again
    assert np.array_equal(saga.Graph.from_edge_index(back, num_nodes=n).edge_index(), back)


def test_edge_index_undirected_and_weights():
    ei = np.array([[0, 1, 2, 2], [1, 2, 0, 3]])
    w = np.array([1.5, 2.5, 3.5, 4.5])
    g = saga.Graph.from_edge_index(ei, num_nodes=5, edge_weight=w, undirected=True)
    assert g.num_nodes == 5 and g.num_edges == 8 and g.has_weights and g.is_symmetric()
    pairs = {(int(u), int(v)): float(x) for (u, v), x in zip(g.edge_index().T, g.edge_weight())}
    assert pairs[(3, 2)] == 4.5 and pairs[(2, 3)] == 4.5 and pairs[(1, 0)] == 1.5


def test_csr_views_are_zero_copy_and_keep_the_graph():
    g = saga.load(KARATE if os.path.exists(KARATE) else _tiny(), undirected=True)
    offsets, indices, weights = g.csr("out")
    assert offsets.dtype == np.int64 and indices.dtype == np.int32 and weights is None
    assert not offsets.flags.writeable and not indices.flags.writeable
    assert np.shares_memory(offsets, g.csr("out")[0])  # the same memory every time: no copy
    ins = g.csr("in")
    assert offsets[-1] == g.num_edges == ins[0][-1]
    del g  # the views keep the graph alive
    assert int(np.diff(offsets).sum()) == len(indices)


def _tiny(tmp=[]):
    if not tmp:
        import tempfile

        d = tempfile.mkdtemp()
        tmp.append(os.path.join(d, "tiny.txt"))
        with open(tmp[0], "w") as f:
            f.write("0 1\n1 2\n2 0\n2 3\n")
    return tmp[0]


def test_every_format_loads_the_same_graph(tmp_path):
    edges = [(10, 20), (20, 30), (30, 10), (30, 40)]
    txt = tmp_path / "g.txt"
    txt.write_text("# comment\n" + "".join(f"{u}\t{v}\n" for u, v in edges))
    gz = tmp_path / "g.txt.gz"
    with gzip.open(gz, "wt") as f:
        f.write("".join(f"{u} {v}\n" for u, v in edges))
    a = saga.load(txt, undirected=True)
    assert list(a.orig_ids) == [10, 20, 30, 40]
    b = saga.load(gz, undirected=True)
    mtx = tmp_path / "g.mtx"
    mtx.write_text("%%MatrixMarket matrix coordinate pattern general\n4 4 4\n1 2\n2 3\n3 1\n3 4\n")
    c = saga.load(mtx, undirected=True)
    metis = tmp_path / "g.graph"
    metis.write_text("4 4\n2 3\n1 3\n1 2 4\n3\n")
    d = saga.load(metis)
    sgr = tmp_path / "g.sgr"
    a.save(sgr)
    e = saga.load(sgr)
    assert list(e.orig_ids) == [10, 20, 30, 40]
    for g in (b, c, d, e):
        assert np.array_equal(g.edge_index(), a.edge_index())


def test_scipy_round_trip():
    sp = pytest.importorskip("scipy.sparse")
    m = sp.random(30, 30, density=0.1, format="csr", random_state=3, dtype=np.float32)
    g = saga.Graph.from_scipy(m)
    back = g.to_scipy()
    assert (back != m).nnz == 0


# ---- errors ---------------------------------------------------------------------------------

def test_parse_error_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("0 1\n1 2\nthree 4\n")
    with pytest.raises(saga.ParseError) as e:
        saga.load(bad)
    assert str(e.value).startswith(f"{bad}:3: ")
    assert e.value.status == "SAGA_ERR_PARSE"
    assert isinstance(e.value, saga.Error)


def test_missing_file_and_bad_arguments(tmp_path):
    with pytest.raises(saga.FileIOError, match="nope.txt"):
        saga.load(tmp_path / "nope.txt")
    g = saga.Graph.from_edge_index([[0, 1], [1, 2]])
    with pytest.raises(saga.InvalidArgError, match="k"):
        saga.partition(g, 7)  # more parts than vertices: the library's message
    with pytest.raises(saga.InvalidArgError, match="outside 0..1"):
        saga.Graph.from_edge_index([[0, 1], [1, 2]], num_nodes=2)
    with pytest.raises(ValueError, match="format"):
        saga.load(tmp_path / "x", format="csv")
    # arrays get the checks a file gets: a weighted edge list refuses a weight that is not finite
    for bad in (np.nan, np.inf):
        with pytest.raises(saga.InvalidArgError, match="edge 1: weight .* not finite"):
            saga.Graph.from_edges([0, 1], [1, 0], num_nodes=2, weights=[1.0, bad])


# ---- algorithms against the command line ----------------------------------------------------

def _scores_file(path):
    ids, scores = [], []
    with open(path) as f:
        for line in f:
            i, s = line.split()
            ids.append(int(i))
            scores.append(float(s))
    return np.array(ids), np.array(scores)


def test_pagerank_equals_the_cli_on_karate(tmp_path):
    need(KARATE)
    out = tmp_path / "scores.txt"
    j = cli("pagerank", "--undirected", KARATE, "--device", "cpu", "-o", str(out))
    cli_ids, cli_scores = _scores_file(out)
    g = saga.load(KARATE, undirected=True)
    ids, scores = saga.pagerank(g, device="cpu")
    assert np.array_equal(ids, cli_ids)
    assert np.array_equal(scores, cli_scores)  # the file holds round-trip precision
    r = saga.pagerank(g, device="cpu")
    assert r.iterations == j["iterations"] and r.converged
    assert [int(i) for i in ids[np.argsort(-scores, kind="stable")[:10]]] == \
        [t["id"] for t in j["top"]]


def test_pagerank_streamed_matches_in_memory():
    need(KARATE)
    g = saga.load(KARATE, undirected=True)
    ids, mem = saga.pagerank(g, device="cpu")
    ids2, streamed = saga.pagerank(g, device="cpu", stream=True, parts=3)
    assert np.array_equal(ids, ids2)
    # the streamed parts add in other orders: within tests/bounds.py's bound, relative to each score
    assert np.all(np.abs(mem - streamed) <= bounds.pagerank(len(mem)) * mem)


def test_pagerank_not_converged():
    g = saga.Graph.from_edge_index([[0, 1, 2], [1, 2, 0]], num_nodes=4)
    with pytest.raises(saga.NotConvergedError, match="max_iters"):
        saga.pagerank(g, max_iters=1, device="cpu")
    r = saga.pagerank(g, max_iters=1, allow_unconverged=True, device="cpu")
    assert not r.converged and r.iterations == 1


def test_connected_components_equal_the_cli(tmp_path):
    ei = np.array([[0, 1, 5, 7, 8], [1, 2, 6, 8, 9]])
    g = saga.Graph.from_edge_index(ei, num_nodes=11)  # directed: components are weak ones
    ids, comp = saga.connected_components(g, device="cpu")
    assert list(comp) == [0, 0, 0, 3, 4, 5, 5, 7, 7, 7, 10]
    r = saga.connected_components(g, device="cpu", stream=True, parts=2)
    assert np.array_equal(r[1], comp) and r.n_components == 6
    # components are named by original ids
    f = tmp_path / "ids.txt"
    f.write_text("10 20\n20 30\n50 60\n")
    ids, comp = saga.connected_components(saga.load(f), device="cpu")
    assert list(ids) == [10, 20, 30, 50, 60] and list(comp) == [10, 10, 10, 50, 50]
    need(KARATE)
    j = cli("cc", KARATE, "--device", "cpu")
    r = saga.connected_components(saga.load(KARATE), device="cpu")
    assert (r.n_components, r.largest) == (j["components"], j["largest"])


def test_partition_methods():
    need(KARATE)
    g = saga.load(KARATE, undirected=True)
    for method in ("metis", "contiguous", "random"):
        p = saga.partition(g, 4, method=method, seed=3)
        assert len(p.offsets) == 5 and p.offsets[-1] == g.num_nodes
        assert sorted(p.perm) == list(range(g.num_nodes))
        assert np.array_equal(p.part[p.perm], np.repeat(np.arange(4), np.diff(p.offsets)))
        src, dst = g.edge_index()
        assert p.edge_cut == int((p.part[src] != p.part[dst]).sum())
    j = cli("partition", KARATE, "--undirected", "--parts", "4", "--seed", "3")
    assert saga.partition(g, 4, seed=3).edge_cut == j["edge_cut"]


# ---- GCN ------------------------------------------------------------------------------------

def _cora_arrays():
    edges = np.loadtxt(os.path.join(CORA, "edges.txt.gz"), dtype=np.int64, comments=("#", "%"))
    labels = np.array([int(s) if s.strip() else -1
                       for s in open(os.path.join(CORA, "labels.txt")).read().splitlines()])
    n = len(labels)
    feats = np.loadtxt(os.path.join(CORA, "features.txt.gz"), comments=("#", "%"))
    rows, cols = feats[:, 0].astype(np.int64), feats[:, 1].astype(np.int64)
    vals = feats[:, 2].astype(np.float32) if feats.shape[1] > 2 else np.ones(len(rows), np.float32)
    order = np.lexsort((cols, rows))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    split = [np.loadtxt(os.path.join(CORA, f"{s}_idx.txt"), dtype=np.int64)
             for s in ("train", "val", "test")]
    n_classes = len(open(os.path.join(CORA, "classes.txt")).read().split("\n")) - 1
    g = saga.Graph.from_edges(edges[:, 0], edges[:, 1], num_nodes=n, undirected=True,
                              self_loops="drop")
    return g, (indptr, cols[order], vals[order], int(cols.max()) + 1), labels, split, n_classes


def test_gcn_on_cora_reaches_the_cli_accuracy():
    need(CORA)
    j = cli("gcn", "--data", CORA, "--seed", "1", "--device", "cpu")
    r = saga.gcn(CORA, seed=1, device="cpu")
    assert r["test_accuracy"] == j["test_accuracy"] and r["val_accuracy"] == j["val_accuracy"]
    # the same library, kernels and order as the command: the same bits
    assert r["loss"] == j["loss"] and r["epochs"] == 200
    assert r["test_accuracy"] > 0.78
    # inference: the final model's classes give the accuracies it reports
    pred = r["predictions"]
    assert pred.dtype == np.int32 and pred.shape == (2708,)
    labels = np.loadtxt(os.path.join(CORA, "labels.txt"), dtype=np.int64)
    test_ids = np.loadtxt(os.path.join(CORA, "test_idx.txt"), dtype=np.int64)
    assert np.mean(pred[test_ids] == labels[test_ids]) == pytest.approx(r["test_accuracy"])
    # the same data as arrays: the same model, the same accuracy
    g, x, y, (train, val, test), c = _cora_arrays()
    mask = np.zeros(g.num_nodes, dtype=bool)
    mask[train] = True
    a = saga.gcn(graph=g, features=x, labels=y, train=mask, val=val, test=test, n_classes=c,
                 seed=1, device="cpu")
    assert (a["test_accuracy"], a["val_accuracy"]) == (r["test_accuracy"], r["val_accuracy"])
    assert np.array_equal(a["predictions"], pred)


def test_gnn_models_equal_the_cli():
    """GAT, GraphSAGE and GIN (the library's layers) as saga gcn --model trains them: the same
    bits, the model's own defaults, options passed through."""
    need(CORA)
    for model, extra, kw in [("gat", ["--heads", "2"], {"heads": 2}),
                             ("sage", ["--aggr", "max"], {"aggr": "max"}),
                             ("gin", [], {})]:
        j = cli("gcn", "--data", CORA, "--model", model, "--epochs", "15", "--device", "cpu",
                *extra)
        r = saga.gcn(CORA, model=model, epochs=15, device="cpu", **kw)
        assert r["model"] == j["model"] == model
        assert (r["loss"], r["test_accuracy"], r["hidden"]) == (j["loss"], j["test_accuracy"],
                                                                  j["hidden"])
        assert r["best_epoch"] == j["best_epoch"] >= 1
        assert r["test_accuracy_at_best_val"] == j["test_accuracy_at_best_val"]
    assert j["hidden"] == 64 and j["lr"] == 0.005  # GIN's own defaults
    t = saga.train(CORA, model="gin", epochs=15, device="cpu")
    assert (t["model"], t["loss"]) == ("gin", j["loss"])
    # early stopping: the same stop and the same final model, the best epoch's
    j = cli("gcn", "--data", CORA, "--model", "gin", "--epochs", "40", "--early-stop", "3",
            "--device", "cpu")
    t = saga.train(CORA, model="gin", epochs=40, early_stop=3, device="cpu")
    for k in ("early_stop", "stopped", "model_epoch", "best_epoch", "epochs", "test_accuracy",
              "val_accuracy"):
        assert t[k] == j[k], (k, t[k], j[k])
    assert t["model_epoch"] == t["best_epoch"] and t["test_accuracy"] == t["test_accuracy_at_best_val"]
    labels = np.loadtxt(os.path.join(CORA, "labels.txt"), dtype=np.int64)
    test_ids = np.loadtxt(os.path.join(CORA, "test_idx.txt"), dtype=np.int64)
    assert np.mean(t["predictions"][test_ids] == labels[test_ids]) == pytest.approx(t["test_accuracy"])
    with pytest.raises(ValueError, match="early_stop must be >= 0"):
        saga.train(CORA, model="gin", early_stop=-1)
    with pytest.raises(ValueError, match="model must be one of"):
        saga.gcn(CORA, model="gnn")
    with pytest.raises(ValueError, match="aggr must be one of"):
        saga.gcn(CORA, model="sage", aggr="median")


def test_gcn_minibatches_equal_the_cli():
    """Mini-batches (fanout): the CLI's training to the bit, whole neighbourhoods in one batch as
    the full graph trains them (within the bound of sums in other orders), refusals."""
    need(CORA)
    j = cli("gcn", "--data", CORA, "--epochs", "10", "--device", "cpu", "--fanout", "5,3",
            "--batch-size", "50", "--model", "sage")
    r = saga.gcn(CORA, epochs=10, device="cpu", fanout=(5, 3), batch_size=50, model="sage")
    assert (r["loss"], r["test_accuracy"], r["batches"]) == (j["loss"], j["test_accuracy"], 3)
    assert r["batch_rows"] == j["batch_rows"] and r["batch_edges"] == j["batch_edges"]
    assert (r["batch_peak_min"], r["batch_peak_max"]) == (j["batch_peak_min"], j["batch_peak_max"])
    even = saga.gcn(CORA, epochs=2, device="cpu", fanout=(5, 3), batch_size=50, model="sage",
                    batch_balance="none")
    assert even["batches"] == 3 and even["batch_peak_min"] <= even["batch_peak_max"]
    inline = saga.gcn(CORA, epochs=10, device="cpu", fanout=(5, 3), batch_size=50, model="sage",
                      prefetch=0)
    assert inline["loss"] == r["loss"]  # the same batches, sampled on the training's path
    j = cli("gcn", "--data", CORA, "--epochs", "3", "--device", "cpu", "--fanout", "5,3",
            "--batch-size", "50", "--eval", "sampled")
    s = saga.gcn(CORA, epochs=3, device="cpu", fanout=(5, 3), batch_size=50, evaluation="sampled")
    assert (s["loss"], s["test_accuracy"]) == (j["loss"], j["test_accuracy"])
    full = saga.gcn(CORA, epochs=10, device="cpu")
    whole = saga.gcn(CORA, epochs=10, device="cpu", fanout=[-1, -1], batch_size=140)
    tol = bounds.gcn_losses(2708, 1433, 16, 7, 10, max_degree=168)[-1]
    assert whole["loss"] == pytest.approx(full["loss"], rel=tol)
    assert "batches" not in full
    with pytest.raises(ValueError, match="2 entries"):
        saga.gcn(CORA, fanout=[5])
    with pytest.raises(ValueError, match="fanout 0"):
        saga.gcn(CORA, fanout=[0, 5])
    with pytest.raises(ValueError, match="sample_degrees must be one of"):
        saga.gcn(CORA, fanout=[5, 5], sample_degrees="some")


def test_gcn_dense_features_kept_as_csr():
    need(CORA)
    g, (indptr, cols, vals, nf), y, (train, val, test), c = _cora_arrays()
    dense = np.zeros((g.num_nodes, nf), dtype=np.float32)
    dense[np.repeat(np.arange(g.num_nodes), np.diff(indptr)), cols] = vals
    args = dict(graph=g, labels=y, train=train, val=val, test=test, n_classes=c, epochs=10,
                seed=1, device="cpu")
    csr = saga.gcn(features=(indptr, cols, vals, nf), **args)
    packed = saga.gcn(features=dense, **args)
    kept = saga.gcn(features=dense, sparse_below=0, **args)
    assert (csr["input_layout"], csr["input_packed"]) == ("sparse", False)
    assert (packed["input_layout"], packed["input_packed"]) == ("sparse", True)
    assert (kept["input_layout"], kept["input_packed"]) == ("dense", False)
    assert packed["loss"] == csr["loss"]  # the CSR a caller would give, to the bit
    assert np.array_equal(packed["predictions"], csr["predictions"])
    # dense rows: the first layer's sums in another order (Cora: in-degree at most 168)
    tol = bounds.gcn_losses(g.num_nodes, nf, 16, c, 10, max_degree=168)[-1]
    assert kept["loss"] == pytest.approx(csr["loss"], rel=tol)
    with pytest.raises(ValueError, match="sparse_below"):
        saga.gcn(features=dense, sparse_below=1.5, **args)


def test_gcn_graphs_changes_no_result():
    # graphs=True reaches the executor (on the CPU there are none to record): the same model
    plain = saga.gcn(CORA, epochs=5, device="cpu")
    rec = saga.gcn(CORA, epochs=5, device="cpu", graphs=True)
    assert rec["loss"] == plain["loss"] and not rec["graph"]
    assert (rec["predictions"] == plain["predictions"]).all()


def test_gcn_streamed_under_a_budget_matches(tmp_path):
    need(CORA)
    mem = saga.gcn(CORA, epochs=20, device="cpu")
    small = saga.gcn(CORA, epochs=20, device="cpu", device_mem=mem["peak_device_bytes"] // 4)
    assert small["memory"] == "streamed" and mem["memory"] == "in-memory"
    assert small["peak_device_bytes"] <= mem["peak_device_bytes"] // 4
    assert small["test_accuracy"] == pytest.approx(mem["test_accuracy"], abs=0.003)
    # a checkpoint, resumed for no further epochs, evaluates the saved model
    ck = tmp_path / "gcn.ckpt"
    saga.gcn(CORA, epochs=20, device="cpu", checkpoint=ck)
    again = saga.gcn(CORA, epochs=20, device="cpu", resume=ck)
    assert again["start_epoch"] == 20 and again["test_accuracy"] == mem["test_accuracy"]


def test_gcn_errors(tmp_path):
    with pytest.raises(saga.FileIOError, match="no-such-dir"):
        saga.gcn(tmp_path / "no-such-dir")
    g = saga.Graph.from_edge_index([[0, 1], [1, 0]], num_nodes=2)
    with pytest.raises(ValueError, match="labels"):
        saga.gcn(graph=g, features=np.ones((2, 3)), labels=[0, 5], train=[0], n_classes=2)
    # as a features file would be refused: values that are not finite, dense or sparse
    x = np.ones((2, 3))
    x[1, 2] = np.nan
    with pytest.raises(ValueError, match="features value 5 is nan"):
        saga.gcn(graph=g, features=x, labels=[0, 1], train=[0], n_classes=2)
    sp = (np.array([0, 1, 2]), np.array([0, 1]), np.array([1.0, -np.inf]), 3)
    with pytest.raises(ValueError, match="sparse features value 1 is -inf"):
        saga.gcn(graph=g, features=sp, labels=[0, 1], train=[0], n_classes=2)


# ---- HEP ------------------------------------------------------------------------------------

def test_hep_build_train_eval_equal_the_cli(tmp_path):
    events = tmp_path / "events"
    if not SAGA_BIN:
        pytest.skip("SAGA_BIN (the saga command) is not set")
    subprocess.run([SAGA_BIN, "hep", "generate", "-o", str(events), "--events", "5",
                    "--min-particles", "50", "--max-particles", "150", "--quiet"], check=True)
    built = saga.hep_build(events)
    jb = cli("hep", "build", "--data", str(events))
    assert len(built) == jb["events"] == 5
    assert sum(len(e["src"]) for e in built) == jb["edges"]
    assert sum(int(e["truth"].sum()) for e in built) == jb["true_edges"]
    assert all(e["hit_features"].shape == (len(e["hit_pt"]), 3) for e in built)
    assert all(e["edge_features"].shape == (len(e["src"]), 11) for e in built)
    assert sum(int(e["hit_endcap"].sum()) for e in built) == jb["regions"]["endcap"]["hits"] > 0
    barrel = saga.hep_build(events, max_missing=0, barrel_only=True)
    jbb = cli("hep", "build", "--data", str(events), "--max-missing", "0", "--barrel-only")
    assert sum(len(e["src"]) for e in barrel) == jbb["edges"] < jb["edges"]
    assert not any(e["hit_endcap"].any() for e in barrel)
    ck, ck_cli = tmp_path / "py.ckpt", tmp_path / "cli.ckpt"
    r = saga.hep_train(events, epochs=3, device="cpu", checkpoint=ck)
    jt = cli("hep", "train", "--data", str(events), "--epochs", "3", "--device", "cpu",
             "--checkpoint", str(ck_cli))
    for k in ("edges", "true_edges", "loss", "edge_efficiency", "edge_purity", "auc",
              "track_efficiency", "tracks", "eval_edges", "parameters"):
        assert r[k] == jt[k], k
    e = saga.hep_eval(events, ck, device="cpu")
    je = cli("hep", "eval", "--data", str(events), "--checkpoint", str(ck_cli), "--device", "cpu")
    for k in ("auc", "edge_purity", "track_efficiency", "eval_edges"):
        assert e[k] == je[k], k
    assert r["lr_schedule"] == jt["lr_schedule"] == "cosine"
    rc = saga.hep_train(events, epochs=3, device="cpu", lr_schedule="constant")
    jc = cli("hep", "train", "--data", str(events), "--epochs", "3", "--device", "cpu",
             "--lr-schedule", "constant")
    assert rc["lr_schedule"] == jc["lr_schedule"] == "constant"
    assert rc["loss"] == jc["loss"] and rc["loss"] != r["loss"]
    # streamed by chunks: the same bits as the command with --stream
    rs = saga.hep_train(events, epochs=2, device="cpu", stream=True, device_mem=64 << 20)
    js = cli("hep", "train", "--data", str(events), "--epochs", "2", "--device", "cpu",
             "--stream", "--device-mem", str(64 << 20))
    assert rs["streamed_batches"] == js["samplers"][0]["streamed_batches"] > 0
    assert rs["loss"] == js["loss"] and rs["chunk_rows"] == js["samplers"][0]["chunk_rows"]
    with pytest.raises(ValueError, match="lr_schedule"):
        saga.hep_train(events, epochs=1, lr_schedule="step")
    with pytest.raises(saga.FileIOError, match="nope"):
        saga.hep_train(tmp_path / "nope")
