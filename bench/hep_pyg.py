#!/usr/bin/env python3
"""hep_pyg.py - saga's Interaction Network for track finding (apps/hep.c) written with PyTorch
Geometric, trained on the graphs `saga hep build --export DIR` writes, with saga's
hyper-parameters, train/eval split, micro-batches and metrics, so that the two compare epoch for
epoch.

    hep_pyg.py --data DIR [--epochs 40] [--hidden 32] [--iterations 4] [--lr 0.003]
               [--lr-schedule cosine|constant] [--pos-weight 1] [--batch-events 1]
               [--eval-fraction 0.2] [--threshold 0.5] [--seed 1] [--threads T] [--json]

DIR holds eventNNNNNNNNN.npz (x, edge_index, edge_attr, y, hit_particle, hit_pt) and meta.json,
whose event list is in the order of `saga hep train --data`; the last --eval-fraction of it
(rounded, at least one event when there are two or more) is held out, as saga does.

Model, as hep_net_forward in apps/hep.c: every MLP is Linear -> ReLU -> Linear (first weight
Kaiming-uniform, second Glorot-uniform, biases zero: saga's initialisers); node and edge encoders
tanh(MLP) to `hidden`; then --iterations rounds of one InteractionRound (a MessagePassing with
shared weights): e' = tanh(MLP([h_src, h_dst, e])) per edge, summed at the outer hit (PyG's
target, aggr="add") and at the inner hit (the source), h' = tanh(MLP([h, sum in, sum out]));
no residuals; then a score MLP over [h_src, h_dst, e], one logit per edge. Loss: the mean
binary cross-entropy with logits and pos_weight; Adam (betas 0.9/0.999, eps 1e-8), its rate set
every epoch as saga's --lr-schedule does.

Micro-batches: saga's `--sampler random` plan, drawn from the same seed: every epoch the
training events are shuffled by the same generator (splitmix64, Fisher-Yates) and cut into runs
of --batch-events, each one optimizer step on its disjoint union (Batch.from_data_list, as PyG's
DataLoader collates). The weights' random draws differ from saga's.

Timed: each training epoch (collating, forward, backward, step); the median over the epochs and
the fastest. Then the held-out events are scored one at a time and measured as `saga hep eval`
does: edge efficiency and purity at --threshold, the exact ROC AUC (ties at their mean rank), and
the track efficiency (the junctions of the kept edges cut by score, then connected components; a
particle above 1 GeV with 3 or more hits is found when 75% of its hits lie in one component that
is 75% its hits), and the same without the junction cut (track_efficiency_cc).

Prints a "RESULT ..." line, or with --json one JSON object as the last line. A Python without
torch or torch_geometric prints why and exits with 77.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

EXIT_SKIP = 77

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"hep_pyg: torch is not importable: {e}")
    sys.exit(EXIT_SKIP)
try:
    import torch_geometric
    from torch_geometric.data import Batch, Data
    from torch_geometric.nn import MessagePassing
    from torch_geometric.utils import scatter
except ImportError as e:
    print(f"hep_pyg: torch_geometric is not importable: {e} (pip install torch_geometric)")
    sys.exit(EXIT_SKIP)

LR_END = 0.01  # HEP_LR_END: the cosine schedule's last learning rate, a fraction of --lr
TRACK_PT = 1.0  # GeV: the tracks the track efficiency counts, as saga's hep_evaluate


def mlp(n_in, n_hidden, n_out):
    """Linear -> ReLU -> Linear with saga's initialisers (hep.c mlp_new)."""
    l1, l2 = torch.nn.Linear(n_in, n_hidden), torch.nn.Linear(n_hidden, n_out)
    torch.nn.init.kaiming_uniform_(l1.weight, nonlinearity="relu")  # +-sqrt(6 / fan_in)
    torch.nn.init.xavier_uniform_(l2.weight)  # +-sqrt(6 / (fan_in + fan_out))
    torch.nn.init.zeros_(l1.bias)
    torch.nn.init.zeros_(l2.bias)
    return torch.nn.Sequential(l1, torch.nn.ReLU(), l2)


class InteractionRound(MessagePassing):
    """One message-passing round; the same module (weights) serves every round."""

    def __init__(self, hidden):
        super().__init__(aggr="add", flow="source_to_target")
        self.edge_up = mlp(3 * hidden, hidden, hidden)
        self.node_up = mlp(3 * hidden, hidden, hidden)
        self._edges = None

    def forward(self, h, edge_index, e):
        n = h.size(0)
        summed_in = self.propagate(edge_index, h=h, e=e, size=(n, n))
        e_new = self._edges
        self._edges = None
        summed_out = scatter(e_new, edge_index[0], dim=0, dim_size=n, reduce="sum")
        h_new = torch.tanh(self.node_up(torch.cat([h, summed_in, summed_out], dim=1)))
        return h_new, e_new

    def message(self, h_j, h_i, e):
        # h_j: the source (inner hit), h_i: the target (outer hit)
        self._edges = torch.tanh(self.edge_up(torch.cat([h_j, h_i, e], dim=1)))
        return self._edges


class InteractionNetwork(torch.nn.Module):
    def __init__(self, n_hit_features, n_edge_features, hidden, iterations):
        super().__init__()
        self.node_encoder = mlp(n_hit_features, hidden, hidden)
        self.edge_encoder = mlp(n_edge_features, hidden, hidden)
        self.round = InteractionRound(hidden)
        self.edge_score = mlp(3 * hidden, hidden, 1)
        self.iterations = iterations

    def forward(self, x, edge_index, edge_attr):
        h = torch.tanh(self.node_encoder(x))
        e = torch.tanh(self.edge_encoder(edge_attr))
        for _ in range(self.iterations):
            h, e = self.round(h, edge_index, e)
        src, dst = edge_index
        return self.edge_score(torch.cat([h[src], h[dst], e], dim=1)).squeeze(1)


# ---- saga's random sampler (hep_plan_epoch, HEP_SAMPLER_RANDOM) --------------------------------

M64 = (1 << 64) - 1


def _mix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def random_plan(n, batch_events, seed, epoch):
    """The micro-batches of 0-based epoch `epoch`: lists of training-event indices."""
    rng = ((seed * 0x9E3779B97F4A7C15) & M64) ^ (((epoch + 1) * 0xD1B54A32D192ED03) & M64)
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        rng, r = _mix64(rng)
        j = r % (i + 1)
        order[i], order[j] = order[j], order[i]
    return [order[b : b + batch_events] for b in range(0, n, batch_events)]


# ---- metrics (hep.c hep_evaluate) ----------------------------------------------------------------


def auc(score, label):
    """Exact ROC AUC (Mann-Whitney), ties at their mean rank; 0.5 when a class is empty."""
    pos = int(label.sum())
    neg = label.size - pos
    if pos == 0 or neg == 0:
        return 0.5
    order = np.argsort(score, kind="mergesort")
    s, y = score[order], label[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    ends = np.r_[starts[1:], s.size]
    ranks = np.repeat((starts + 1 + ends) / 2.0, ends - starts)
    return float((ranks[y == 1].sum() - 0.5 * pos * (pos + 1)) / (pos * neg))


def components(n, src, dst):
    """Connected-component labels of the undirected graph (n vertices, edges src-dst)."""
    label = np.arange(n)
    while True:
        m = np.minimum(label[src], label[dst])
        new = label.copy()
        np.minimum.at(new, src, m)
        np.minimum.at(new, dst, m)
        new = new[new]
        while True:  # pointer jumping to each root
            nxt = new[new]
            if np.array_equal(nxt, new):
                break
            new = nxt
        if np.array_equal(new, label):
            return label
        label = new


JUNCTION_TOLERANCE = 0.005  # saga's HEP_JUNCTION_TOLERANCE


def cut_junctions(ev, kept, score):
    """The kept edges that score within JUNCTION_TOLERANCE of the highest-scoring kept edge out of
    their inner hit and of the highest into their outer hit, as hep_track_efficiency with
    scores."""
    n = ev["x"].shape[0]
    ei = ev["edge_index"]
    idx = np.flatnonzero(kept)
    out = kept.copy()
    for side in (0, 1):
        best = np.full(n, -np.inf)
        np.maximum.at(best, ei[side][idx], score[idx])
        out &= score >= best[ei[side]] - JUNCTION_TOLERANCE
    return out


def track_efficiency(ev, kept, score=None):
    """(found, total) for one event: hep_track_efficiency's rule; with score the junctions are cut
    first."""
    n = ev["x"].shape[0]
    ei = ev["edge_index"]
    if score is not None:
        kept = cut_junctions(ev, kept, score)
    comp = components(n, ei[0][kept], ei[1][kept])
    size = np.bincount(comp, minlength=n)
    pid, pt = ev["hit_particle"], ev["hit_pt"]
    sel = (pid != 0) & (pt > TRACK_PT)
    found = total = 0
    if not sel.any():
        return 0, 0
    p, c = pid[sel], comp[sel]
    for particle in np.unique(p):
        cs = c[p == particle]
        if cs.size < 3:
            continue
        total += 1
        vals, counts = np.unique(cs, return_counts=True)
        k = int(np.argmax(counts))
        best = counts[k]
        found += int(best >= 0.75 * cs.size and best >= 0.75 * size[vals[k]])
    return found, total


def evaluate(model, events, threshold):
    model.eval()
    scores, labels = [], []
    tp = fp = fn = found = found_cc = tracks = 0
    with torch.no_grad():
        for ev in events:
            d = ev["data"]
            p = torch.sigmoid(model(d.x, d.edge_index, d.edge_attr)).numpy()
            y = ev["y"] > 0.5
            kept = p > threshold
            tp += int((kept & y).sum())
            fp += int((kept & ~y).sum())
            fn += int((~kept & y).sum())
            f, t = track_efficiency(ev, kept, p)
            fc, _ = track_efficiency(ev, kept)
            found, found_cc, tracks = found + f, found_cc + fc, tracks + t
            scores.append(p)
            labels.append(y.astype(np.int64))
    s, y = np.concatenate(scores), np.concatenate(labels)
    return {
        "edge_efficiency": tp / (tp + fn) if tp + fn else 0.0,
        "edge_purity": tp / (tp + fp) if tp + fp else 0.0,
        "auc": auc(s, y),
        "track_efficiency": found / tracks if tracks else 0.0,
        "track_efficiency_cc": found_cc / tracks if tracks else 0.0,
        "tracks": tracks,
        "eval_edges": int(s.size),
        "threshold": threshold,
    }


# ---- data --------------------------------------------------------------------------------------


def load(data_dir):
    meta_path = os.path.join(data_dir, "meta.json")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except OSError as e:
        sys.exit(f"hep_pyg: {meta_path}: {e.strerror} (write it with saga hep build --export DIR)")
    events = []
    for m in meta["events"]:
        a = np.load(os.path.join(data_dir, m["file"]))
        ev = {k: a[k] for k in ("x", "edge_index", "edge_attr", "y", "hit_particle", "hit_pt")}
        ev["data"] = Data(
            x=torch.from_numpy(ev["x"]),
            edge_index=torch.from_numpy(ev["edge_index"]),
            edge_attr=torch.from_numpy(ev["edge_attr"]),
            y=torch.from_numpy(ev["y"]),
        )
        events.append(ev)
    return meta, events


def split(n, eval_fraction):
    """Training events [0, n_train), as hep_data_load: llround, at least one held out."""
    n_eval = 0
    if eval_fraction > 0 and n >= 2:
        n_eval = int(math.floor(eval_fraction * n + 0.5))
        n_eval = min(max(n_eval, 1), n - 1)
    return n - n_eval


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a directory saga hep build --export wrote")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--lr-schedule", choices=("cosine", "constant"), default="cosine")
    ap.add_argument("--pos-weight", type=float, default=1.0)
    ap.add_argument("--batch-events", type=int, default=1)
    ap.add_argument("--eval-fraction", type=float, default=0.2)
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--json", action="store_true", help="end with one JSON object")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    t0 = time.perf_counter()
    meta, events = load(a.data)
    t_load = time.perf_counter() - t0
    n_train = split(len(events), a.eval_fraction)
    train = events[:n_train]
    held = events[n_train:] if n_train < len(events) else events[:n_train]
    model = InteractionNetwork(
        len(meta["hit_features"]), len(meta["edge_features"]), a.hidden, a.iterations
    )
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(a.pos_weight))
    print(
        f"hep_pyg: torch {torch.__version__}, torch_geometric {torch_geometric.__version__}, "
        f"{torch.get_num_threads()} threads; {len(train)} training events, "
        f"{len(events) - n_train} held out; hidden {a.hidden}, {a.iterations} rounds, "
        f"{n_params} parameters",
        file=sys.stderr,
    )

    secs, loss = [], float("nan")
    for epoch in range(a.epochs):
        if a.lr_schedule == "cosine" and a.epochs > 1:  # hep_lr_at: lr down to 1% of it
            lo = a.lr * LR_END
            for g in opt.param_groups:
                g["lr"] = lo + 0.5 * (a.lr - lo) * (1 + math.cos(math.pi * epoch / (a.epochs - 1)))
        model.train()
        plan = random_plan(len(train), a.batch_events, a.seed, epoch)
        t = time.perf_counter()
        total = 0.0
        for ids in plan:
            b = Batch.from_data_list([train[i]["data"] for i in ids])
            opt.zero_grad()
            out = loss_fn(model(b.x, b.edge_index, b.edge_attr), b.y)
            out.backward()
            opt.step()
            total += out.item()
        secs.append(time.perf_counter() - t)
        loss = total / len(plan)
        print(f"hep_pyg: epoch {epoch + 1}/{a.epochs} loss {loss:.4f} {secs[-1]:.3f} s",
              file=sys.stderr)
    metrics = evaluate(model, held, a.threshold)
    r = {
        "epochs": a.epochs,
        "micro_batches": -(-len(train) // a.batch_events),
        "epoch_seconds": statistics.median(secs) if secs else 0.0,
        "epoch_seconds_min": min(secs) if secs else 0.0,
        "loss": loss,
        "parameters": n_params,
        "threads": torch.get_num_threads(),
        "train_events": len(train),
        "eval_events": len(events) - n_train,
        "load_seconds": t_load,
        **metrics,
    }
    print(
        "RESULT "
        + " ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items())
    )
    if a.json:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
