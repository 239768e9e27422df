#!/usr/bin/env python3
"""shards_model.py - an alpha-beta model of one GCN training epoch over ranks that each hold a
shard (saga partition --shards, saga_net_opts.halo), checked against bench/shards.sh's run on this
machine and projected to GPUs: 8 over NVLink and 4 nodes over 100 Gb/s, for the generated 1M graph
and for a graph of ogbn-papers100M's size.

    python3 bench/shards_model.py [OUT_DIR] [--gpu-compute-ms MS[,MS...]] [--train T]

OUT_DIR (default bench/out/shards) holds shards.sh's runs.jsonl, comm.tsv (bench_comm between 2
ranks) and the shard directories (their manifests give each shard's own and halo rows for 2, 4
and 8 shards). Python 3 standard library only.

One epoch on R ranks, as engine/exec/net_halo.c runs it (each exchange blocks; no overlap):

  T(R) = T_compute / R
       + sum over the 4 exchanges x (before each of the 2 program stages, forward, and their
         gradients back):  alpha + B_x / beta
       + the loss's all-reduce and one bucketed all-reduce of the gradients (ring):
             2 (R-1) alpha  +  2 (R-1) alpha + 2 (R-1)/R * P / beta

B_x is the bytes a rank sends in exchange x: the halo rows its peers' demanded rows read (at most
the shard's halo rows; with a training set of most vertices, nearly all of them) times the stage
input's width (the hidden width before the first aggregation, the classes before the second)
times 4. On this machine the measured run gives the received rows (remote_rows: both forward
exchanges, rank 0's) and the bytes; a projection takes the halo rows of the manifests at R shards
times the fraction of them the measured run received at 2. P is the parameters' bytes.

The check: the modelled exchanges and all-reduces with bench_comm's alpha (8-byte exchange) and
beta (slope over >= 4 MiB) against the measured comm_seconds (which includes a rank waiting for the
slower one: the model has no such term).

Projections use nominal link figures (NOT measured here) and, for the papers100M-sized graph
(111,059,956 vertices, 1,615,685,872 edges, 128 features, 172 classes; a 2-layer GCN of hidden
width 256, which aggregates the 128 input features first and projects to 172 before the second
aggregation), a halo per shard assumed to be the 1M graph's halo-to-own ratio at the same shard
count and the same share of it demanded as the measured run (a generated graph with random
long-range edges: a real citation graph's METIS cut is smaller, and a 1% training set demands a
smaller share, so both overstate the exchanges). T_compute on one GPU is an input (--gpu-compute-ms);
the communication does not depend on it.
"""
import argparse
import json
import os
import statistics
import sys

NOMINAL = {
    "nvlink": (10e-6, 450e9, "8 GPUs, NVLink 4: 450 GB/s per direction per GPU, ~10 us (NCCL)"),
    "net100": (5e-6, 12.5e9, "4 nodes, 100 Gb/s: 12.5 GB/s per direction per node, ~5 us"),
}
PAPERS = {"n": 111_059_956, "m": 1_615_685_872, "features": 128, "hidden": 256, "classes": 172}


def manifest_halos(path):
    own, halo = [], []
    for line in open(os.path.join(path, "manifest.txt")):
        p = line.split()
        if p and p[0] == "shard":
            own.append(int(p[4]) - int(p[3]))
            halo.append(int(p[6]))
    return own, halo


def fit(comm):
    """alpha: 8-byte alltoallv; beta: least-squares slope over sizes >= 4 MiB (Hockney)."""
    pts = {}
    for line in open(comm):
        p = line.split("\t")
        if len(p) >= 7 and p[0] == "alltoallv" and p[1] == "2":
            pts.setdefault(int(p[2]), []).append(float(p[5]) * 1e-6)
    pts = sorted((b, statistics.median(v)) for b, v in pts.items())
    a = pts[0][1]
    big = [(b, t) for b, t in pts if b >= 4 << 20] or pts[-2:]
    slope = sum(b * (t - a) for b, t in big) / sum(b * b for b, _ in big)
    return a, 1.0 / slope


def gcn_widths(F, H, C):
    """The widths the 4 exchanges move (apps/gcn.c: a layer projects before aggregating when that
    narrows its rows): the first program stage's input, the second's, then their gradients."""
    w1 = H if H < F else F
    w2 = C if C < H else H
    return [w1, w2, w2, w1]


def epoch(R, rows_sent, widths, params, compute, alpha, beta):
    """(total, exchanges, all-reduces) seconds of one epoch on R ranks."""
    if R == 1:
        return compute, 0.0, 0.0
    ex = sum(alpha + rows_sent * w * 4 / beta for w in widths)
    ar = 2 * (R - 1) * alpha + 2 * (R - 1) * alpha + 2 * (R - 1) / R * params / beta
    return compute / R + ex + ar, ex, ar


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(os.path.dirname(__file__), "out", "shards"))
    ap.add_argument("--gpu-compute-ms", default="5,20,50",
                    help="the whole graph's epoch on one GPU, ms (one column each)")
    ap.add_argument("--papers-gpu-compute-ms", default="1000,5000,20000",
                    help="the papers100M-sized graph's epoch on one GPU (were it to fit), ms")
    ap.add_argument("--train", type=int, default=100000, help="the TRAIN run of shards.sh to use")
    a = ap.parse_args()
    runs = [json.loads(l) for l in open(os.path.join(a.out, "runs.jsonl"))]
    runs = [j for j in runs if j.get("train_rows") == a.train]
    if not runs:
        sys.exit(f"shards_model: no runs with TRAIN={a.train} in {a.out}/runs.jsonl")
    sh = [j for j in runs if j["name"] == "shards"]
    one = [j for j in runs if j["name"] == "one"]
    j = sh[-1]
    H, C, F = j["hidden"], j["classes"], j["features"]
    widths = gcn_widths(F, H, C)
    params = 4 * (F * H + H + H * C + C)
    R2 = j["ranks"]
    got = j["remote_rows"] / 2 / R2  # a rank's received rows per forward exchange (the mean)
    base = [d for d in os.listdir(a.out) if d.endswith(".s2") and (f"train{a.train}" in d) == (a.train > 0)]
    own2, halo2 = manifest_halos(os.path.join(a.out, base[0]))
    frac = got / statistics.mean(halo2)
    alpha, beta = fit(os.path.join(a.out, "comm.tsv"))
    ex, ar = epoch(2, got, widths, params, 0, alpha, beta)[1:]
    meas = statistics.median(x["comm_seconds"] for x in sh)
    print(f"this machine: alpha {alpha * 1e6:.1f} us, beta {beta / 1e9:.2f} GB/s (bench_comm, 2 ranks)")
    print(f"2 ranks over shards, TRAIN={a.train}: a rank receives {got:.0f} halo rows an exchange "
          f"on average ({100 * frac:.0f}% of its shard's halo, {statistics.mean(halo2):.0f} rows); the ranks "
          f"send {j['comm_bytes']['sent']} bytes an epoch in all")
    print(f"  modelled: exchanges {ex * 1e3:.2f} ms + all-reduces {ar * 1e3:.3f} ms = "
          f"{(ex + ar) * 1e3:.2f} ms; measured comm_seconds (median) {meas * 1e3:.2f} ms "
          f"(includes waiting for the slower rank)")
    print(f"  measured epochs: one process x 2 threads {statistics.median(x['epoch_ms_median'] for x in one):.2f} ms, "
          f"2 ranks x 1 thread {statistics.median(x['epoch_ms_median'] for x in sh):.2f} ms")
    print()
    print("projections (nominal links, NOT measured; compute = the whole graph's epoch on 1 GPU / R)")
    for gname, n_scale in (("generated 1M", None), ("papers100M-sized", PAPERS)):
        for link, R in (("nvlink", 8), ("net100", 4)):
            al, be, what = NOMINAL[link]
            d = [x for x in os.listdir(a.out) if x.endswith(f".s{R}") and (f"train{a.train}" in x) == (a.train > 0)]
            if not d:
                print(f"  {gname}, {what}: no {R}-shard directory in {a.out}")
                continue
            own, halo = manifest_halos(os.path.join(a.out, d[0]))
            ratio = max(h / o for h, o in zip(halo, own))
            if n_scale:
                o = n_scale["n"] / R
                h = ratio * o
                w = gcn_widths(n_scale["features"], n_scale["hidden"], n_scale["classes"])
                p = 4 * (n_scale["features"] * n_scale["hidden"] + n_scale["hidden"] +
                         n_scale["hidden"] * n_scale["classes"] + n_scale["classes"])
            else:
                o, h, w, p = max(own), max(halo), widths, params
            rows = frac * h
            comp = [float(x) * 1e-3 for x in
                    (a.papers_gpu_compute_ms if n_scale else a.gpu_compute_ms).split(",")]
            cols = []
            for c in comp:
                t, e, r = epoch(R, rows, w, p, c, al, be)
                dom = "compute" if c / R >= e + r else "exchanges" if e >= r else "all-reduce"
                cols.append(f"{t * 1e3:.2f} ms ({dom})")
            print(f"  {gname}, {what}: shard {o:,.0f} own + {h:,.0f} halo rows, "
                  f"{rows * sum(w) * 4 / 1e6:.1f} MB sent an epoch, exchanges "
                  f"{epoch(R, rows, w, p, 0, al, be)[1] * 1e3:.2f} ms, all-reduces "
                  f"{epoch(R, rows, w, p, 0, al, be)[2] * 1e3:.3f} ms; epoch at "
                  + ", ".join(f"{c * 1e3:g}" for c in comp) + " ms of 1-GPU compute: " + "; ".join(cols))


if __name__ == "__main__":
    main()
