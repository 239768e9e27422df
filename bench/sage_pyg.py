#!/usr/bin/env python3
"""sage_pyg.py - the PyTorch Geometric side of the mini-batch comparison: GraphSAGE (two SAGEConv
layers, mean aggregation) trained on mini-batches from PyG's NeighborLoader, as
`saga gcn --model sage --fanout A,B --batch-size N` trains on saga's sampler.

    sage_pyg.py --data DIR [--fanout 15,10] [--batch-size 512] [--hidden 64] [--epochs 10]
                [--lr 0.01] [--dropout 0.5] [--weight-decay 5e-4] [--threads T] [--seed 1]
                [--log FILE]

DIR is laid out like datasets/cora (read with the loader of bench/gcn_torch.py; features
row-normalised); the edges are made symmetric, duplicates merged, self-loops dropped, as saga's
loader does. Model: dropout -> SAGEConv(F, H) -> relu -> dropout -> SAGEConv(H, C) ->
log_softmax (each layer W_neigh mean(h_u) + W_self h_v + b, as saga's GraphSAGE layer), Adam with
the weight decay on every parameter, the negative log-likelihood on each batch's seeds.

An epoch is one pass of the NeighborLoader over the training vertices (shuffled): sampling and
training are timed together, as saga's epoch times both. After each epoch the model is evaluated
exactly on the whole graph (not timed). Writes one JSON line per epoch to --log (epoch, loss,
epoch_ms, val_accuracy, test_accuracy), and prints a RESULT line with the median epoch time and the
sampler's throughput alone (sampled edges per second over one pass without training).

Exits with 77 when torch, torch_geometric or its sampler's backend (pyg-lib or torch-sparse) is
missing: bench/README.md says how to install them.
"""
import argparse
import json
import os
import statistics
import sys
import time

EXIT_SKIP = 77

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"sage_pyg: torch is not importable: {e}")
    sys.exit(EXIT_SKIP)
try:
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.nn import SAGEConv
    from torch_geometric.utils import coalesce, remove_self_loops
except ImportError as e:
    print(f"sage_pyg: torch_geometric is not importable: {e} (pip install torch_geometric)")
    sys.exit(EXIT_SKIP)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gcn_torch import read_dir  # noqa: E402  (the shared loader of the Cora layout)


class Sage(torch.nn.Module):
    def __init__(self, n_in, n_hidden, n_out, dropout):
        super().__init__()
        self.conv1 = SAGEConv(n_in, n_hidden, aggr="mean")
        self.conv2 = SAGEConv(n_hidden, n_out, aggr="mean")
        self.dropout = dropout

    def forward(self, x, edge_index):
        x = F.dropout(x, self.dropout, self.training)
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, edge_index)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--fanout", default="15,10")
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log", default=None)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    e, x, labels, split, n_cls = read_dir(a.data)
    n = labels.numel()
    ei = torch.cat([e.t(), e.t().flip(0)], dim=1)
    ei, _ = remove_self_loops(ei)
    ei = coalesce(ei, num_nodes=n)
    data = Data(x=x, edge_index=ei, y=labels)
    fan = [int(f) for f in a.fanout.split(",")]
    loader = NeighborLoader(data, num_neighbors=fan, batch_size=a.batch_size,
                            input_nodes=split["train"], shuffle=True)
    try:
        sampled, t0 = 0, time.perf_counter()
        for b in loader:  # the sampler alone: one pass, no training
            sampled += b.edge_index.size(1)
        sample_s = time.perf_counter() - t0
    except ImportError as err:
        print(f"sage_pyg: PyG's sampler is not usable: {err} (pip install torch-sparse)")
        sys.exit(EXIT_SKIP)
    model = Sage(x.size(1), a.hidden, n_cls, a.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    log = open(a.log, "w") if a.log else None
    times = []
    for epoch in range(1, a.epochs + 1):
        model.train()
        t0 = time.perf_counter()
        total, count = 0.0, 0
        for b in loader:
            opt.zero_grad()
            out = model(b.x, b.edge_index)[: b.batch_size]
            loss = F.nll_loss(F.log_softmax(out, dim=1), b.y[: b.batch_size])
            loss.backward()
            opt.step()
            total += float(loss) * b.batch_size
            count += b.batch_size
        ms = (time.perf_counter() - t0) * 1e3
        times.append(ms)
        model.eval()
        with torch.no_grad():
            pred = model(data.x, data.edge_index).argmax(dim=1)
        acc = {k: float((pred[split[k]] == labels[split[k]]).float().mean()) for k in ("val", "test")}
        line = {"epoch": epoch, "loss": total / count, "epoch_ms": ms,
                "val_accuracy": acc["val"], "test_accuracy": acc["test"]}
        if log:
            log.write(json.dumps(line) + "\n")
            log.flush()
    print(f"RESULT peer=pyg threads={torch.get_num_threads()} fanout={a.fanout} "
          f"batch_size={a.batch_size} median_epoch_ms={statistics.median(times):.2f} "
          f"sampled_edges_per_s={sampled / sample_s:.4g} "
          f"test_accuracy={acc['test']:.4f} val_accuracy={acc['val']:.4f}")


if __name__ == "__main__":
    main()
