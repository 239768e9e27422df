#!/usr/bin/env python3
"""gcn_torch.py - the PyTorch side of the GCN comparison: Kipf & Welling's two-layer GCN
(ICLR 2017) trained full-batch on the CPU with torch.sparse.mm.

    gcn_torch.py --synthetic 100000,20,128,8 [--threads T] [--epochs 200]
    gcn_torch.py --data DIR [--seeds 10]        (DIR laid out like datasets/cora)

Model: X -> dropout -> X W1 -> A_hat . -> + b1 -> relu -> dropout -> H W2 -> A_hat . -> + b2 ->
log_softmax, hidden 16, dropout 0.5, Adam lr 0.01, weight decay 5e-4 on the first layer only,
Glorot-uniform weights, zero biases, negative log-likelihood on the training vertices.
A_hat = D^-1/2 (A + I) D^-1/2 where A is the symmetric 0/1 adjacency (duplicate edges merged,
self-loops in the input dropped before I is added) and D its row sums.

--data DIR reads edges.txt.gz ("u v" per line, each undirected edge once), features.txt.gz
(sparse "node feature" lines, value 1), labels.txt, train_idx.txt, val_idx.txt, test_idx.txt;
features are row-normalised as in Kipf's code. Reports the test accuracy after --epochs epochs
for each seed, and the mean and standard deviation.

--synthetic N,DEG,F,C makes a deterministic graph from --graph-seed: N*DEG/2 uniformly random
pairs u != v made symmetric (so the average degree is about DEG), Gaussian N(0,1) features,
uniformly random labels in 0..C-1, every vertex in the training set. Only the epochs are timed
(forward, backward and the optimiser step, after --warmup untimed epochs); prints the median and
total epoch time and the thread count.
"""
import argparse
import gzip
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def normalized_adjacency(n, src, dst, fmt):
    """A_hat = D^-1/2 (A + I) D^-1/2 as a sparse n x n float32 tensor (COO or CSR)."""
    keep = src != dst
    src, dst = src[keep], dst[keep]
    loops = torch.arange(n, dtype=torch.int64)
    rows = torch.cat([src, dst, loops])
    cols = torch.cat([dst, src, loops])
    a = torch.sparse_coo_tensor(torch.stack([rows, cols]), torch.ones(rows.numel()), (n, n))
    a = a.coalesce()
    idx = a.indices()
    # Duplicates were summed by coalesce: a 0/1 adjacency keeps each pair once.
    val = torch.ones(idx.shape[1])
    deg = torch.zeros(n).index_add_(0, idx[0], val)
    dinv = deg.pow(-0.5)
    val = dinv[idx[0]] * val * dinv[idx[1]]
    a = torch.sparse_coo_tensor(idx, val, (n, n)).coalesce()
    return a.to_sparse_csr() if fmt == "csr" else a


def read_ints(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [[int(t) for t in line.split()] for line in f if line.strip()]


def read_pairs(path):
    """The first two integers of every non-blank line of a (gzipped) text file, as a rows x 2
    int64 tensor: an edge list ("u v") or sparse features ("vertex feature [value]"). Reads in
    blocks of lines, so that files of tens of millions of lines load in seconds."""
    opener = gzip.open if path.endswith(".gz") else open
    parts = []
    with opener(path, "rb") as f:
        while True:
            lines = f.readlines(1 << 24)
            if not lines:
                break
            tokens = b" ".join(lines).split()
            if len(tokens) == 2 * len(lines):  # the common case: every line is "a b"
                values = list(map(int, tokens))
            else:
                values = [int(t) for line in lines if line.strip() for t in line.split()[:2]]
            parts.append(torch.tensor(values, dtype=torch.int64).view(-1, 2))
    return torch.cat(parts) if parts else torch.zeros(0, 2, dtype=torch.int64)


def read_dir(d):
    """What a directory in the Cora layout holds, on the CPU: the edges as listed (E x 2), the
    row-normalised features, the labels, the split and the number of classes."""
    labels = torch.tensor([r[0] for r in read_ints(os.path.join(d, "labels.txt"))])
    n = labels.numel()
    e = read_pairs(os.path.join(d, "edges.txt.gz"))
    fe = read_pairs(os.path.join(d, "features.txt.gz"))
    n_feat = int(fe[:, 1].max()) + 1
    x = torch.zeros(n, n_feat)
    x[fe[:, 0], fe[:, 1]] = 1.0
    x = x / x.sum(1, keepdim=True).clamp(min=1.0)  # row normalisation, as Kipf's preprocessing
    split = {}
    for name in ("train", "val", "test"):
        split[name] = torch.tensor([r[0] for r in read_ints(os.path.join(d, name + "_idx.txt"))])
    return e, x, labels, split, int(labels.max()) + 1


def load_dir(d, fmt):
    e, x, labels, split, n_cls = read_dir(d)
    a_hat = normalized_adjacency(labels.numel(), e[:, 0], e[:, 1], fmt)
    return a_hat, x, labels, split, n_cls


def make_synthetic(n, deg, n_feat, n_cls, seed, fmt):
    g = torch.Generator().manual_seed(seed)
    m = n * deg // 2
    src = torch.randint(0, n, (m,), generator=g)
    dst = torch.randint(0, n, (m,), generator=g)
    x = torch.randn(n, n_feat, generator=g)
    labels = torch.randint(0, n_cls, (n,), generator=g)
    a_hat = normalized_adjacency(n, src, dst, fmt)
    split = {"train": torch.arange(n)}
    return a_hat, x, labels, split, n_cls


class GCN(torch.nn.Module):
    def __init__(self, n_in, n_hidden, n_out, dropout):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.empty(n_in, n_hidden))
        self.b1 = torch.nn.Parameter(torch.zeros(n_hidden))
        self.w2 = torch.nn.Parameter(torch.empty(n_hidden, n_out))
        self.b2 = torch.nn.Parameter(torch.zeros(n_out))
        torch.nn.init.xavier_uniform_(self.w1)
        torch.nn.init.xavier_uniform_(self.w2)
        self.dropout = dropout

    def forward(self, a_hat, x):
        h = F.dropout(x, self.dropout, self.training)
        h = torch.relu(torch.sparse.mm(a_hat, h @ self.w1) + self.b1)
        h = F.dropout(h, self.dropout, self.training)
        return F.log_softmax(torch.sparse.mm(a_hat, h @ self.w2) + self.b2, dim=1)


def train(a_hat, x, labels, split, n_cls, args, seed, timed):
    torch.manual_seed(seed)
    model = GCN(x.shape[1], args.hidden, n_cls, args.dropout)
    opt = torch.optim.Adam(
        [
            {"params": [model.w1, model.b1], "weight_decay": args.weight_decay},
            {"params": [model.w2, model.b2], "weight_decay": 0.0},
        ],
        lr=args.lr,
    )
    train_idx = split["train"]
    times = []
    for epoch in range(args.epochs + (args.warmup if timed else 0)):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        out = model(a_hat, x)
        loss = F.nll_loss(out[train_idx], labels[train_idx])
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if timed and epoch >= args.warmup:
            times.append(dt)
    model.eval()
    with torch.no_grad():
        pred = model(a_hat, x).argmax(1)
    acc = {k: (pred[v] == labels[v]).float().mean().item() for k, v in split.items()}
    return loss.item(), acc, times


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="DIR", help="a directory laid out like datasets/cora")
    src.add_argument("--synthetic", metavar="N,DEG,F,C", help="e.g. 100000,20,128,8")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="default: every core")
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--warmup", type=int, default=3, help="untimed epochs before the timed ones")
    p.add_argument("--seeds", type=int, default=1, help="train this many times (seeds 0..S-1)")
    p.add_argument("--graph-seed", type=int, default=1)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--format", choices=("coo", "csr"), default="coo", help="of A_hat")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    t0 = time.perf_counter()
    if args.data:
        a_hat, x, labels, split, n_cls = load_dir(args.data, args.format)
    else:
        try:
            n, deg, n_feat, n_cls = (int(t) for t in args.synthetic.split(","))
        except ValueError:
            p.error("--synthetic wants N,DEG,F,C, e.g. 100000,20,128,8")
        a_hat, x, labels, split, n_cls = make_synthetic(
            n, deg, n_feat, n_cls, args.graph_seed, args.format
        )
    nnz = a_hat._nnz() if a_hat.layout == torch.sparse_coo else a_hat.values().numel()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, A_hat {args.format}; "
        f"{x.shape[0]} vertices, {nnz} non-zeros in A_hat (self-loops included), "
        f"{x.shape[1]} features, {n_cls} classes; prepared in {time.perf_counter() - t0:.2f} s"
    )

    tests = []
    for seed in range(args.seeds):
        loss, acc, times = train(a_hat, x, labels, split, n_cls, args, seed, True)
        med = statistics.median(times) * 1e3
        accs = " ".join(f"{k}={v:.4f}" for k, v in acc.items())
        print(
            f"seed {seed}: final loss {loss:.4f}, {accs}; {len(times)} epochs, "
            f"median {med:.2f} ms, total {sum(times):.3f} s"
        )
        if "test" in acc:
            tests.append(acc["test"])
    if tests:
        sd = statistics.stdev(tests) if len(tests) > 1 else 0.0
        print(f"test accuracy over {len(tests)} seeds: mean {statistics.mean(tests):.4f}, "
              f"std {sd:.4f}")
    print(f"RESULT threads={torch.get_num_threads()} median_epoch_ms={med:.3f} "
          f"total_s={sum(times):.3f} epochs={len(times)}"
          + (f" test_acc_mean={statistics.mean(tests):.4f}" if tests else ""))


if __name__ == "__main__":
    sys.exit(main())
