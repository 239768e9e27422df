#!/usr/bin/env python3
"""gcn_pyg.py - the PyTorch Geometric side of the GPU GCN comparison: Kipf & Welling's two-layer
GCN built from PyG's GCNConv, trained full-batch on the same data set as `saga gcn --data DIR`.

    gcn_pyg.py --data DIR [--device auto|cuda|cpu] [--epochs 30] [--adj edge_index,csr]

DIR is laid out like datasets/cora, as `saga generate citation` writes it (edges.txt.gz,
features.txt.gz, labels.txt, train_idx.txt, val_idx.txt, test_idx.txt); it is read with the
loader of bench/gcn_torch.py (features row-normalised as Kipf's preprocessing). The edges are
made symmetric with duplicates merged and self-loops dropped, as saga's loader does; GCNConv adds
one self-loop per vertex and normalises, so each layer is D^-1/2 (A + I) D^-1/2 H W + b.

Model: X -> dropout -> GCNConv(F, 16) -> relu -> dropout -> GCNConv(16, C) -> log_softmax, hidden
16, dropout 0.5, Adam lr 0.01, weight decay 5e-4 on the first layer only, negative
log-likelihood on the training vertices; GCNConv(cached=True) normalises the adjacency once, as
PyG's own GCN example does. --adj picks how the graph reaches GCNConv: `edge_index` (2 x E, PyG's
message passing with scatter) and/or `csr` (a torch.sparse CSR adjacency: one sparse-dense
product per layer); with several, each is trained and reported in turn.

Only the training epochs are timed (forward, backward, optimiser step, then a device
synchronisation, after --warmup untimed epochs); the evaluation after the last epoch is not.
Prints a "RESULT device=... adj=... median_epoch_ms=..." line for each --adj.

--device auto takes the GPU when torch sees one, else the CPU (and says so). An explicit
--device cuda without a usable GPU prints "no CUDA device: ..." and exits with 77, as does a
Python without torch_geometric ("torch_geometric is not importable: ...").
"""
import argparse
import os
import statistics
import sys
import time

EXIT_SKIP = 77

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"gcn_pyg: torch is not importable: {e}")
    sys.exit(EXIT_SKIP)
try:
    import torch_geometric
    from torch_geometric.nn import GCNConv
    from torch_geometric.utils import coalesce, remove_self_loops
except ImportError as e:
    print(f"gcn_pyg: torch_geometric is not importable: {e} (pip install torch_geometric)")
    sys.exit(EXIT_SKIP)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gcn_torch import read_dir  # noqa: E402  (the shared loader of the Cora layout)


class GCN(torch.nn.Module):
    def __init__(self, n_in, n_hidden, n_out, dropout):
        super().__init__()
        self.conv1 = GCNConv(n_in, n_hidden, cached=True)
        self.conv2 = GCNConv(n_hidden, n_out, cached=True)
        self.dropout = dropout

    def forward(self, x, adj):
        h = F.dropout(x, self.dropout, self.training)
        h = torch.relu(self.conv1(h, adj))
        h = F.dropout(h, self.dropout, self.training)
        return F.log_softmax(self.conv2(h, adj), dim=1)


def symmetric_edge_index(n, e):
    """2 x E' edge index: both directions of every listed edge, self-loops dropped, duplicates
    merged, sorted by (source, destination)."""
    ei = torch.cat([e.t(), e.t().flip(0)], dim=1)
    ei, _ = remove_self_loops(ei)
    return coalesce(ei, num_nodes=n)


def csr_adjacency(n, ei):
    """The 0/1 adjacency as a torch.sparse CSR tensor (symmetric, so it is its own transpose, the
    adj_t GCNConv expects)."""
    a = torch.sparse_coo_tensor(ei, torch.ones(ei.shape[1]), (n, n)).coalesce()
    return a.to_sparse_csr()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(adj, x, labels, split, n_cls, args, device):
    torch.manual_seed(args.seed)
    model = GCN(x.shape[1], args.hidden, n_cls, args.dropout).to(device)
    opt = torch.optim.Adam(
        [
            {"params": model.conv1.parameters(), "weight_decay": args.weight_decay},
            {"params": model.conv2.parameters(), "weight_decay": 0.0},
        ],
        lr=args.lr,
    )
    train_idx = split["train"]
    times = []
    for epoch in range(args.warmup + args.epochs):
        sync(device)
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        out = model(x, adj)
        loss = F.nll_loss(out[train_idx], labels[train_idx])
        loss.backward()
        opt.step()
        sync(device)
        if epoch >= args.warmup:
            times.append(time.perf_counter() - t0)
    model.eval()
    with torch.no_grad():
        pred = model(x, adj).argmax(1)
    acc = {k: (pred[v] == labels[v]).float().mean().item() for k, v in split.items()}
    return loss.item(), acc, times


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", metavar="DIR", required=True, help="a directory like datasets/cora")
    p.add_argument("--device", default="auto", help="auto, cuda, cuda:N or cpu (default auto)")
    p.add_argument("--adj", default="edge_index", help="edge_index, csr, or both: edge_index,csr")
    p.add_argument("--epochs", type=int, default=30, help="timed epochs")
    p.add_argument("--warmup", type=int, default=3, help="untimed epochs before the timed ones")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (default: torch's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    args = p.parse_args()
    adjs = args.adj.split(",")
    for a in adjs:
        if a not in ("edge_index", "csr"):
            p.error(f"--adj: unknown '{a}' (edge_index, csr)")
    if args.epochs < 1 or args.warmup < 0:
        p.error("--epochs must be at least 1 and --warmup at least 0")
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    if args.device == "auto":
        if torch.cuda.is_available():
            device = torch.device("cuda")
        else:
            print("gcn_pyg: torch sees no CUDA device; running on the CPU")
            device = torch.device("cpu")
    else:
        try:
            device = torch.device(args.device)
        except RuntimeError as e:
            p.error(f"--device: {e}")
        if device.type == "cuda":
            if not torch.cuda.is_available():
                print(f"no CUDA device: torch {torch.__version__} sees none "
                      f"(torch.cuda.is_available() is false; built for CUDA {torch.version.cuda})")
                return EXIT_SKIP
            if (device.index or 0) >= torch.cuda.device_count():
                print(f"no CUDA device: {device} asked for, {torch.cuda.device_count()} found")
                return EXIT_SKIP
        elif device.type != "cpu":
            p.error(f"--device: {args.device} is neither cpu nor cuda")

    t0 = time.perf_counter()
    e, x, labels, split, n_cls = read_dir(args.data)
    n = labels.numel()
    ei = symmetric_edge_index(n, e)
    t_load = time.perf_counter() - t0
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        where = f"{device} ({name}), CUDA {torch.version.cuda}"
    else:
        where = f"cpu, {torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, torch_geometric {torch_geometric.__version__}, {where}; "
          f"{n} vertices, {ei.shape[1]} directed edges (self-loops not counted), "
          f"{x.shape[1]} features, {n_cls} classes, {split['train'].numel()} training vertices; "
          f"loaded in {t_load:.2f} s")

    x, labels = x.to(device), labels.to(device)
    split = {k: v.to(device) for k, v in split.items()}
    for a in adjs:
        adj = ei.to(device) if a == "edge_index" else csr_adjacency(n, ei).to(device)
        loss, acc, times = train(adj, x, labels, split, n_cls, args, device)
        med = statistics.median(times) * 1e3
        accs = " ".join(f"{k}={v:.4f}" for k, v in acc.items())
        print(f"{a}: final loss {loss:.4f}, {accs}; {len(times)} epochs, median {med:.3f} ms, "
              f"total {sum(times):.3f} s")
        print(f"RESULT device={device.type} adj={a} median_epoch_ms={med:.3f} "
              f"total_s={sum(times):.3f} epochs={len(times)} test_acc={acc['test']:.4f}")
        del adj
    return 0


if __name__ == "__main__":
    sys.exit(main())
