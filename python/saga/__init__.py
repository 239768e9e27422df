"""saga from Python: graphs, PageRank, components, partitions and GCN training over saga's C library.

    import saga
    g = saga.load("edges.txt.gz", undirected=True)       # every format `saga` reads
    ids, scores = saga.pagerank(g)                        # original ids, float64 scores
    g2 = saga.Graph.from_edge_index(edge_index, num_nodes=n)
    res = saga.gcn("datasets/cora", epochs=200, seed=1)   # what `saga gcn --json` reports

The work is done by libsaga (the library the `saga` command and C programs link): this package is
a thin CPython extension over its public API, with NumPy arrays in and out. Arrays that saga owns
(a graph's CSR, its original ids, results) come back as NumPy views without a copy; arrays going
in are converted to saga's types (int32 vertex ids, float32 weights and features) only when they
are not already. A failed call raises saga.Error (one subclass per saga_status, e.g.
saga.ParseError) whose message is saga_last_error()'s: for a malformed file it names the file and
the line. Vertex programs of one's own are written in C against the same library (see the README).
"""

import os as _os

import numpy as _np

from . import _saga
from ._saga import (  # noqa: F401  (the exceptions are part of the API)
    BudgetError,
    CommError,
    CorruptError,
    DeviceError,
    Error,
    FileIOError,
    InternalError,
    InvalidArgError,
    NotConvergedError,
    OutOfMemoryError,
    ParseError,
    UnsupportedError,
)

__all__ = [
    "Graph", "load", "pagerank", "connected_components", "partition", "gcn", "train", "hep_build",
    "hep_train", "hep_eval", "Error",
    "ParseError", "FileIOError", "CorruptError", "InvalidArgError", "UnsupportedError",
    "NotConvergedError", "BudgetError", "DeviceError", "OutOfMemoryError", "InternalError",
    "CommError", "version", "prefix", "include_dir", "library_dir", "cmake_dir", "pkgconfig_dir",
]

__version__ = _saga.version()

_FORMATS = {"auto": 0, "edgelist": 1, "mtx": 2, "metis": 3, "sgr": 4}
_WEIGHTS = {"auto": 0, "ignore": 1, "require": 2}
_SELF_LOOPS = {"keep": 0, "drop": 1}
_DUPLICATES = {"auto": 0, "keep": 1, "drop": 2, "sum": 3}
_PARTITION = {"metis": 0, "contiguous": 1, "random": 2, "fennel": 3}
_SAVED = {"recompute": 0, "offload": 1}
_TRANSFER = {"f32": 0, "bf16": 1, "fp16": 2}


def _choice(table, name, what):
    try:
        return table[name]
    except (KeyError, TypeError):
        raise ValueError(f"saga: {what} must be one of {', '.join(table)}, got {name!r}") from None


def _bytes(v):
    """device_mem as the command line takes it: an int, or '64M', '2G', '512K'."""
    if v is None:
        return 0
    if isinstance(v, str):
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
        s = v.strip().upper().rstrip("B")
        mult = units.get(s[-1:], 1)
        if s[-1:] in units:
            s = s[:-1]
        try:
            return int(float(s) * mult)
        except ValueError:
            raise ValueError(f"saga: device_mem: expected bytes like 64M or 2G, got {v!r}") from None
    if int(v) < 0:
        raise ValueError(f"saga: device_mem must not be negative, got {v}")
    return int(v)


class Graph:
    """A directed graph in saga's CSR form (in-edges and out-edges), with the original ids.

    Make one with saga.load(path) or the from_* constructors. The arrays it hands out (csr(),
    orig_ids) are read-only views of saga's memory that keep the graph alive.
    """

    __slots__ = ("_g",)

    def __init__(self, handle):
        if not isinstance(handle, _saga.Graph):
            raise TypeError("saga.Graph: use saga.load() or Graph.from_edges/from_edge_index/"
                            "from_scipy")
        self._g = handle

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def from_edges(cls, src, dst, num_nodes=None, weights=None, ids=None, undirected=False,
                   self_loops="keep", duplicates="auto"):
        """A graph with edges src[k] -> dst[k]. Vertices are 0..num_nodes-1 (num_nodes defaults to
        the largest endpoint + 1); ids (num_nodes increasing integers) are their original ids."""
        src = _np.ascontiguousarray(src)
        dst = _np.ascontiguousarray(dst)
        if src.ndim != 1 or dst.shape != src.shape:
            raise ValueError(f"saga: src and dst must be 1-D of one length, got shapes "
                             f"{src.shape} and {dst.shape}")
        for name, a in (("src", src), ("dst", dst)):
            if a.size and not _np.issubdtype(a.dtype, _np.integer):
                raise TypeError(f"saga: {name} must hold integers, got {a.dtype}")
        if num_nodes is None:
            num_nodes = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
        num_nodes = int(num_nodes)
        for name, a in (("src", src), ("dst", dst)):
            if a.size and (a.min() < 0 or a.max() >= num_nodes):
                bad = a[(a < 0) | (a >= num_nodes)][0]
                raise InvalidArgError(f"saga: {name} holds vertex {int(bad)}, outside "
                                      f"0..{num_nodes - 1} (num_nodes {num_nodes})")
        w = None if weights is None else _np.ascontiguousarray(weights, dtype=_np.float32)
        i = None if ids is None else _np.ascontiguousarray(ids, dtype=_np.int64)
        return cls(_saga.from_edges(num_nodes, _np.ascontiguousarray(src, dtype=_np.int32),
                                    _np.ascontiguousarray(dst, dtype=_np.int32), w, i,
                                    bool(undirected), _choice(_SELF_LOOPS, self_loops, "self_loops"),
                                    _choice(_DUPLICATES, duplicates, "duplicates")))

    @classmethod
    def from_edge_index(cls, edge_index, num_nodes=None, edge_weight=None, **kw):
        """From a PyG-style edge_index: a 2 x E integer array (row 0 sources, row 1 targets)."""
        ei = _np.asarray(edge_index)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise ValueError(f"saga: edge_index must have shape (2, E), got {ei.shape}")
        return cls.from_edges(ei[0], ei[1], num_nodes=num_nodes, weights=edge_weight, **kw)

    @classmethod
    def from_scipy(cls, matrix, weighted=True, **kw):
        """From a scipy.sparse matrix (CSR, COO, ...): entry (i, j) is the edge i -> j, its value
        the weight (weighted=False drops the values)."""
        coo = matrix.tocoo()
        if coo.shape[0] != coo.shape[1]:
            raise ValueError(f"saga: an adjacency matrix must be square, got {coo.shape}")
        return cls.from_edges(coo.row, coo.col, num_nodes=coo.shape[0],
                              weights=coo.data if weighted else None, **kw)

    # ---- properties and arrays ---------------------------------------------------------------
    @property
    def num_nodes(self):
        return self._g.n_vertices()

    @property
    def num_edges(self):
        """Directed edges (an undirected graph holds each edge both ways)."""
        return self._g.n_edges()

    @property
    def has_weights(self):
        return self._g.has_weights()

    def is_symmetric(self):
        return self._g.is_symmetric()

    @property
    def orig_ids(self):
        """The original id of every vertex (int64, a view; 0..n-1 made up when the ids are)."""
        ids = self._g.orig_ids()
        if ids is None:
            return _np.arange(self.num_nodes, dtype=_np.int64)
        return _np.asarray(ids)

    def csr(self, direction="out"):
        """(offsets int64, indices int32, weights float32 or None) of the out-edges (row u lists
        the destinations of u) or the in-edges (direction="in"); read-only views, no copy."""
        if direction not in ("out", "in"):
            raise ValueError(f"saga: direction must be 'out' or 'in', got {direction!r}")
        o, i, w = self._g.csr(direction == "out")
        return _np.asarray(o), _np.asarray(i), None if w is None else _np.asarray(w)

    def edge_index(self):
        """The edges as a 2 x E int64 array (internal ids 0..n-1), sorted by source then target."""
        o, i, _ = self.csr("out")
        src = _np.repeat(_np.arange(self.num_nodes, dtype=_np.int64), _np.diff(o))
        return _np.stack([src, i.astype(_np.int64)])

    def edge_weight(self):
        """The weights in edge_index() order, or None."""
        return self.csr("out")[2]

    def to_scipy(self):
        """The adjacency as a scipy.sparse.csr_matrix (entry (u, v) for the edge u -> v)."""
        import scipy.sparse as sp

        o, i, w = self.csr("out")
        data = _np.ones(len(i), dtype=_np.float32) if w is None else w
        return sp.csr_matrix((data, i, o), shape=(self.num_nodes, self.num_nodes))

    def save(self, path):
        """Writes the graph as saga's binary .sgr cache (loaded back by mmap)."""
        self._g.save_sgr(_os.fspath(path))

    def __repr__(self):
        return (f"saga.Graph({self.num_nodes} vertices, {self.num_edges} edges"
                f"{', weighted' if self.has_weights else ''})")


def load(path, undirected=False, format="auto", weights="auto", self_loops=None,
         duplicates="auto"):
    """Loads a graph file as `saga` does: SNAP edge lists (text or gzip), Matrix Market, METIS, or
    the .sgr cache. A malformed file raises saga.ParseError naming the file and the line."""
    sl = "keep" if self_loops is None else self_loops
    return Graph(_saga.load(_os.fspath(path), _choice(_FORMATS, format, "format"),
                            _choice(_WEIGHTS, weights, "weights"), bool(undirected),
                            _choice(_SELF_LOOPS, sl, "self_loops"), self_loops is not None,
                            _choice(_DUPLICATES, duplicates, "duplicates")))


def _graph(g):
    if isinstance(g, Graph):
        return g._g
    raise TypeError(f"saga: expected a saga.Graph, got {type(g).__name__}")


class PageRank(tuple):
    """(ids, scores), with .iterations, .l1_change, .seconds, .device besides."""


def pagerank(g, damping=0.85, tol=1e-10, max_iters=1000, allow_unconverged=False, device="auto",
             device_mem=None, stream=False, parts=0, partition="metis"):
    """PageRank as `saga pagerank` computes it (the graph executor, in memory or streamed under
    device_mem). Returns (ids, scores): the original ids and their float64 scores, in vertex
    order. Not converging within max_iters raises saga.NotConvergedError unless
    allow_unconverged."""
    if not 0 <= damping < 1:
        raise InvalidArgError(f"saga: damping must be in [0, 1), got {damping}")
    if not tol > 0:
        raise InvalidArgError(f"saga: tol must be positive, got {tol}")
    scores, iters, l1, secs, dev = _saga.pagerank(
        _graph(g), float(damping), float(tol), int(max_iters), device, _bytes(device_mem),
        bool(stream), int(parts), _choice(_PARTITION, partition, "partition"))
    if not l1 < tol and not allow_unconverged:
        raise NotConvergedError(
            f"pagerank did not converge in {iters} iterations: L1 change {l1:.3g}, tolerance "
            f"{tol:g} (raise max_iters or tol, or pass allow_unconverged=True)")
    r = PageRank((g.orig_ids, _np.asarray(scores)))
    r.iterations, r.l1_change, r.seconds, r.device = iters, l1, secs, dev
    r.converged = l1 < tol
    return r


def connected_components(g, device="auto", device_mem=None, stream=False, parts=0,
                         partition="metis"):
    """Weakly connected components, as `saga cc` finds them (edge direction ignored). Returns (ids,
    component): every vertex's original id and the original id of the smallest vertex of its
    component."""
    comp, n, iters, largest, sym = _saga.connected_components(
        _graph(g), device, _bytes(device_mem), bool(stream), int(parts),
        _choice(_PARTITION, partition, "partition"))
    ids = g.orig_ids
    r = PageRank((ids, ids[_np.asarray(comp)]))
    r.n_components, r.iterations, r.largest, r.symmetrized = n, iters, largest, sym
    return r


class Partition:
    """The result of saga.partition: part (the part of every vertex), perm (new id -> old id:
    parts in order), offsets (part q holds new ids offsets[q]..offsets[q+1]-1), edge_cut, balance."""

    def __init__(self, part, perm, offsets, edge_cut, balance, seconds, method):
        self.part, self.perm, self.offsets = part, perm, offsets
        self.edge_cut, self.balance, self.seconds, self.method = edge_cut, balance, seconds, method

    def __repr__(self):
        return (f"saga.Partition({len(self.offsets) - 1} parts by {self.method}, edge cut "
                f"{self.edge_cut}, balance {self.balance:.3f})")


def partition(g, k, method="metis", seed=1, balance_edges=False):
    """Cuts g into k parts (saga_partition_graph): METIS, contiguous ranges or a seeded shuffle."""
    part, perm, offs, cut, bal, secs = _saga.partition(
        _graph(g), int(k), _choice(_PARTITION, method, "method"), int(seed), bool(balance_edges))
    return Partition(_np.asarray(part), _np.asarray(perm), _np.asarray(offs), cut, bal, secs,
                     method)


def _indices(x, n, what):
    a = _np.asarray(x)
    if a.dtype == bool:
        if a.shape != (n,):
            raise ValueError(f"saga.gcn: {what} mask must have {n} entries, got shape {a.shape}")
        a = _np.flatnonzero(a)
    return _np.ascontiguousarray(a, dtype=_np.int32)


_MODELS = {"gcn": 0, "gat": 1, "sage": 2, "gin": 3}
_AGGRS = {"sum": 0, "mean": 1, "max": 2}


def _or_model(v, convert):
    """A hyper-parameter as given, or -1: the model's own default."""
    return -1 if v is None else convert(v)


def gcn(data=None, *, graph=None, features=None, labels=None, train=None, val=None, test=None,
        n_classes=None, normalize_features=True, dense_features=False, epochs=200, hidden=None,
        lr=None, dropout=None, weight_decay=None, seed=1, device="auto", device_mem=None,
        stream=False, parts=0, partition="metis", saved="recompute", transfer_precision="f32",
        host_halos=False, checkpoint=None, checkpoint_every=0, resume=None, sparse_below=0.25,
        graphs=False, model="gcn", heads=8, aggr="mean", fanout=None, batch_size=512,
        sample_degrees="full", batch_balance="memory", prefetch=2, evaluation="exact",
        early_stop=0):
    """Trains a two-layer GNN for node classification as `saga gcn` does (same models, options,
    seed and results): model "gcn" (Kipf & Welling, the default), "gat" (heads attention heads),
    "sage" (GraphSAGE, aggr "mean", "max" or "sum") or "gin", layers of the library
    (saga_layers.h). hidden, lr, dropout and weight_decay left as None take the model's defaults,
    those of `saga gcn --model` (GCN: 16, 0.01, 0.5, 5e-4 on the first layer's weights).

    Either data, a directory in the layout of the bundled Cora (edges, features, labels and the
    split; saga_dataset.h), or arrays: graph (a saga.Graph, undirected), features (n x F), labels
    (n ints, -1 for none), train/val/test (vertex indices or boolean masks). features may be
    dense (an n x F array) or sparse (a scipy.sparse matrix, or a tuple (indptr, indices, values,
    F) of CSR arrays) and stay as given, as `saga gcn` keeps a sparse features file sparse, except
    that dense features with at most sparse_below of their entries non-zero are kept as a CSR
    (only their non-zeros move and are multiplied; 0 keeps them dense). Streams through the
    device under device_mem (bytes or '64M') when the model does not fit, or with stream=True.
    resume=FILE with epochs equal to the checkpoint's evaluates the saved model (inference).
    early_stop=P ends training once P epochs pass without a better validation accuracy and makes
    the final model the best epoch's (`saga gcn --early-stop P`; the GAT paper's protocol with
    100): "model_epoch" says whose, "stopped" whether training ended before epochs.
    graphs=True records each pass in memory as a CUDA graph (`saga gcn --graphs`; the same
    results; nothing on the CPU).
    fanout=(A, B) trains on mini-batches of batch_size training vertices with A sampled
    in-neighbours per vertex, then B per vertex of those (-1: all), as `saga gcn --fanout`;
    sample_degrees "full" or "sampled" says which degrees GCN's normalisation takes on a batch;
    batch_balance "memory", "edges", "rows" or "none" what an epoch's batches even out; prefetch
    how many batches a thread of its own samples ahead (0: none; the same batches); evaluation
    "exact" (the whole graph) or "sampled" (as `saga gcn --eval sampled`); over shards
    each rank samples its own training vertices, without a thread ahead. The result
    then also has "batches" (per epoch), "batch_rows" and "batch_edges" (means), and
    "batch_peak_min" / "batch_peak_max" (the last epoch's batches' device peaks).
    Returns a dict with the keys of `saga gcn --json` that describe the run (test_accuracy, ...)
    and "predictions": the final model's class of every vertex (an int32 NumPy array).
    data may also be a directory of shards (`saga partition --data DIR --shards R`): run under a
    launcher (mpirun -np R python ...), each process trains as one rank on its own shard alone,
    the accuracies and counts are the whole data set's, and "predictions" holds the process's own
    rows, whose vertices (rows of the data set) are in "ids"; "rank" and "ranks" say which.
    """
    common = dict(
        normalize=bool(normalize_features), dense_features=bool(dense_features),
        epochs=int(epochs), hidden=_or_model(hidden, int), lr=_or_model(lr, float),
        dropout=_or_model(dropout, float), weight_decay=_or_model(weight_decay, float),
        model=_choice(_MODELS, model, "model"), heads=int(heads),
        aggr=_choice(_AGGRS, aggr, "aggr"), seed=int(seed), device=device,
        device_mem=_bytes(device_mem), stream=bool(stream), parts=int(parts),
        partition=_choice(_PARTITION, partition, "partition"),
        saved=_choice(_SAVED, saved, "saved"),
        transfer=_choice(_TRANSFER, transfer_precision, "transfer_precision"),
        host_halos=bool(host_halos),
        checkpoint=None if checkpoint is None else _os.fspath(checkpoint),
        checkpoint_every=int(checkpoint_every),
        resume=None if resume is None else _os.fspath(resume), sparse_below=float(sparse_below),
        graphs=bool(graphs), fanout=None if fanout is None else [int(f) for f in fanout],
        batch_size=int(batch_size),
        sample_degrees=_choice({"full": 0, "sampled": 1}, sample_degrees, "sample_degrees"),
        batch_balance=_choice({"memory": 0, "edges": 1, "rows": 2, "none": 3}, batch_balance,
                              "batch_balance"), prefetch=int(prefetch),
        eval_sampled=bool(_choice({"exact": 0, "sampled": 1}, evaluation, "evaluation")),
        early_stop=int(early_stop))
    if data is not None:
        if graph is not None or features is not None:
            raise ValueError("saga.gcn: give either a data directory or arrays, not both")
        return _predictions(_saga.gcn(data=_os.fspath(data), **common))
    if graph is None or features is None or labels is None or train is None:
        raise ValueError("saga.gcn: without a data directory, graph, features, labels and train "
                         "are needed")
    n = graph.num_nodes
    if hasattr(features, "tocsr"):  # a scipy.sparse matrix
        csr = features.tocsr()
        csr.sort_indices()
        features = (csr.indptr, csr.indices, csr.data, csr.shape[1])
    if isinstance(features, tuple):  # CSR: (indptr, indices, values, n_features)
        if len(features) != 4:
            raise ValueError("saga.gcn: sparse features are (indptr, indices, values, n_features)")
        xo, xi, xv, nf = features
        common.update(x_offsets=_np.ascontiguousarray(xo, dtype=_np.int64),
                      x_indices=_np.ascontiguousarray(xi, dtype=_np.int32),
                      x_values=_np.ascontiguousarray(xv, dtype=_np.float32), n_features=int(nf))
        x = None
    else:
        x = _np.ascontiguousarray(features, dtype=_np.float32)
        if x.ndim != 2 or x.shape[0] != n:
            raise ValueError(f"saga.gcn: features must have shape ({n}, F), got {x.shape}")
    y = _np.ascontiguousarray(labels, dtype=_np.int32)
    if y.shape != (n,):
        raise ValueError(f"saga.gcn: labels must have {n} entries, got shape {y.shape}")
    if n_classes is None:
        n_classes = int(y.max(initial=-1)) + 1
    empty = _np.zeros(0, dtype=_np.int32)
    return _predictions(
        _saga.gcn(graph=_graph(graph), features=x, labels=y, n_classes=int(n_classes),
                  train=_indices(train, n, "train"),
                  val=empty if val is None else _indices(val, n, "val"),
                  test=empty if test is None else _indices(test, n, "test"), **common))


def train(data=None, *, model="gcn", **kw):
    """Trains a two-layer GNN of the library for node classification: model "gcn", "gat",
    "sage" or "gin". saga.gcn under its general name: the same options, defaults and result."""
    return gcn(data, model=model, **kw)


def _predictions(result):
    """The C module's Arrays of predictions (and over shards their rows' ids) as NumPy arrays
    (views of the same buffers)."""
    for key in ("predictions", "ids"):
        if key in result:
            result[key] = _np.asarray(result[key])
    return result


_SAMPLERS = {"random": 0, "sorted": 1, "balanced": 2}
_LR_SCHEDULES = {"constant": 0, "cosine": 1}


def hep_build(data, pt_min=1.0, phi_slope_max=0.0005, z0_max=250.0, max_missing=1,
              barrel_only=False):
    """The graphs `saga hep build --data DIR` builds: a list with a dict per event (event_id;
    hit_features n x 3; hit_particle, hit_pt, hit_endcap (1: on an end-cap disk); src, dst
    (inner hit, outer hit); edge_features E x 11; truth (1: consecutive hits of one particle);
    true_edges, true_segments), NumPy arrays over the memory saga built them in. max_missing and
    barrel_only are --max-missing and --barrel-only."""
    events = _saga.hep_build(_os.fspath(data), float(pt_min), float(phi_slope_max),
                             float(z0_max), int(max_missing), bool(barrel_only))
    for e in events:
        for k, v in e.items():
            if isinstance(v, _saga.Array):
                e[k] = _np.asarray(v)
        e["hit_features"] = e["hit_features"].reshape(-1, 3)
        e["edge_features"] = e["edge_features"].reshape(e["truth"].shape[0], -1)
    return events


def hep_train(data, epochs=40, lr=0.003, hidden=32, iterations=4, sampler="random",
              batch_events=1, edge_budget=None, hit_weight=1.3, pos_weight=1.0, eval_fraction=0.2,
              threshold=0.5, seed=1, checkpoint=None, resume=None, accumulate=1, device="auto",
              pt_min=1.0, phi_slope_max=0.0005, z0_max=250.0, lr_schedule="cosine",
              max_missing=1, barrel_only=False, device_mem=None, stream=False):
    """Trains the Interaction Network on the events of data as `saga hep train` does, and
    evaluates it on the held-out events; returns a dict with the keys of its --json that describe
    the run (edge_efficiency, edge_purity, auc, track_efficiency, loss, ...). lr_schedule is
    "cosine" (from lr down to lr / 100 over the epochs) or "constant", as --lr-schedule.
    device_mem (bytes) is the device's budget: micro-batches that do not fit are streamed
    through it by chunks (streamed_batches, chunk_rows), as --device-mem; stream=True streams
    every one, as --stream."""
    return _saga.hep_train(
        _os.fspath(data), epochs=int(epochs), lr=float(lr), hidden=int(hidden),
        iterations=int(iterations), sampler=_choice(_SAMPLERS, sampler, "sampler"),
        batch_events=int(batch_events), edge_budget=int(edge_budget or 0),
        hit_weight=float(hit_weight), pos_weight=float(pos_weight),
        eval_fraction=float(eval_fraction), threshold=float(threshold), seed=int(seed),
        checkpoint=None if checkpoint is None else _os.fspath(checkpoint),
        resume=None if resume is None else _os.fspath(resume), accumulate=int(accumulate),
        device=device, pt_min=float(pt_min), phi_slope_max=float(phi_slope_max),
        z0_max=float(z0_max), lr_schedule=_choice(_LR_SCHEDULES, lr_schedule, "lr_schedule"),
        max_missing=int(max_missing), barrel_only=bool(barrel_only),
        device_mem=int(device_mem or 0), stream=bool(stream))


def hep_eval(data, checkpoint, hidden=32, iterations=4, threshold=0.5, device="auto", pt_min=1.0,
             phi_slope_max=0.0005, z0_max=250.0, max_missing=1, barrel_only=False):
    """Evaluates a checkpoint of hep_train on every event of data, as `saga hep eval`."""
    return _saga.hep_eval(_os.fspath(data), _os.fspath(checkpoint), int(hidden), int(iterations),
                          float(threshold), device, float(pt_min), float(phi_slope_max),
                          float(z0_max), int(max_missing), bool(barrel_only))


# ---- the installed library, for C programs that share it ------------------------------------
def prefix():
    """Where pip installed saga's C library, headers and CMake / pkg-config files (the package
    directory); None when this module comes from a build tree."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    return here if _os.path.isdir(_os.path.join(here, "include", "saga")) else None


def include_dir():
    p = prefix()
    return p and _os.path.join(p, "include")


def library_dir():
    p = prefix()
    return p and _os.path.join(p, "lib")


def cmake_dir():
    p = prefix()
    return p and _os.path.join(p, "lib", "cmake", "saga")


def pkgconfig_dir():
    p = prefix()
    return p and _os.path.join(p, "lib", "pkgconfig")


def version():
    return __version__
