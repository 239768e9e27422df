#!/usr/bin/env python3
"""ranks_model.py - an alpha-beta model of one partition-parallel GCN training epoch in saga,
fitted to and checked against what bench/ranks.sh measured, then projected to GPUs.

    python3 bench/ranks_model.py [OUT_DIR] [--gpu-compute-ms MS[,MS...]] [--graph LABEL] ...

OUT_DIR (default bench/out/ranks) holds ranks.sh's runs.jsonl (one `saga --json` object per run)
and comm.tsv (bench_comm's table per round). Python 3 standard library only.

One epoch on R ranks, as engine/exec/net_run.c runs it (no overlap: each exchange blocks):

  T(R) = T_compute / R
       + sum over the 4 halo exchanges x (2 program stages forward, their gradients back):
             alpha + B_x / beta + 2 B_x / beta_copy
       + sum over the all-reduces a (the loss, then one per parameter tensor):
             2 (R-1) alpha + 2 (R-1)/R * P_a / beta            (ring)

B_x is the bytes one rank sends in exchange x: the rows received from other ranks (remote_rows,
summed over the ranks, divided by R) times the row width (the first layer's aggregated width
and the second's) times 4 bytes. beta_copy is the host's memcpy bandwidth: each exchange packs
the rows it sends into one buffer and unpacks (or adds) the rows it receives. P_a is the bytes of
the all-reduce. The epoch excludes evaluation, so the output gather is not in it.

This machine: alpha is bench_comm's 8-byte saga_comm_alltoallv between 2 ranks and 1/beta the
slope of its time over sizes of 4 MiB and more (Hockney's fit; each size the median over the
rounds of its median), beta_copy bench_comm's memcpy (the median over rounds and sizes >= 4 MiB).
T_compute is the measured epoch of one rank with one thread, divided among min(R, cores) cores:
in memory (pred1, T_compute(1) / R as such), and with the graph in 2 parts (pred2: the plan each
rank runs, block by block, with its copies). pred3 adds the modelled exchanges to the run's own
epoch less its measured exchanges: the communication model alone, in context. Nothing models a
rank waiting for a slower one, which the measured comm_seconds (the slowest rank's) includes.

GPU projections use nominal link figures (not measured here) and the byte counts measured here
for the generated graph (METIS parts): halo bytes, parameter bytes, and the bytes the executor
copies host <-> device per epoch on a rank (h2d_bytes + d2h_bytes: in saga today the halo rows go
through host memory, so a GPU copies them over PCIe each way). T_compute on one GPU is an input
(--gpu-compute-ms); the communication alone does not depend on it.
"""
import argparse
import json
import math
import os
import statistics
import sys
import textwrap

# Nominal figures (vendor specifications and typical published latencies, NOT measured here).
NOMINAL = {
    "nvlink": {"alpha_us": 10.0, "beta_gbs": 450.0,
               "what": "NVLink 4 (H100 SXM): 450 GB/s per direction per GPU; NCCL latency ~10 us"},
    "net100": {"alpha_us": 5.0, "beta_gbs": 12.5,
               "what": "100 Gb/s network: 12.5 GB/s per direction per node; ~5 us latency"},
    "pcie5": {"alpha_us": 10.0, "beta_gbs": 50.0,
              "what": "PCIe 5 x16: ~50 GB/s per direction achievable (64 GB/s raw); ~10 us per copy"},
}


def read_runs(out):
    with open(os.path.join(out, "runs.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_comm(out):
    """comm.tsv rows: round, op, ranks, bytes_per_rank, bytes_per_peer, reps, us_median, us_min."""
    rows = []
    with open(os.path.join(out, "comm.tsv")) as f:
        for line in f:
            p = line.split("\t")
            if len(p) < 8:
                continue
            rows.append({"round": int(p[0]), "op": p[1], "ranks": int(p[2]),
                         "bytes": int(p[3]), "us": float(p[6])})
    return rows


def per_size(rows, op, ranks):
    """{bytes: median over rounds of the median microseconds}."""
    by = {}
    for r in rows:
        if r["op"] == op and r["ranks"] == ranks:
            by.setdefault(r["bytes"], []).append(r["us"])
    return {b: statistics.median(v) for b, v in sorted(by.items())}


def fit_alpha_beta(points, big=4 << 20):
    """Hockney's T = alpha + B / beta: alpha the time of the smallest message, 1/beta the slope
    (least squares through alpha) over the messages of at least `big` bytes, where the halo
    exchanges of the 1M-vertex graph are (7 to 20 MB a rank). Returns (alpha s, beta B/s, RMS relative error over all
    sizes, over the sizes of the slope)."""
    points = sorted(points)
    a = points[0][1]
    large = [(B, T) for B, T in points if B >= big] or points[-2:]
    slope = sum(B * (T - a) for B, T in large) / sum(B * B for B, _ in large)

    def rms(ps):
        return math.sqrt(sum(((a + slope * B - T) / T) ** 2 for B, T in ps) / len(ps))

    return a, 1.0 / slope, rms(points), rms(large), len(large)


def widths(j):
    H, F, C = j["hidden"], j["features"], j["classes"]
    w1 = H if H < F else F  # the first layer projects before aggregating when it narrows
    w2 = C if C < H else H
    return w1, w2


def param_tensors(j):
    """Bytes of each all-reduce after a training pass: the loss (f64), then each parameter
    (conv1.weight, conv1.bias, conv2.weight, conv2.bias)."""
    H, F, C = j["hidden"], j["features"], j["classes"]
    t = [F * H, H, H * C, C]
    if sum(t) != j["parameters"]:
        sys.exit(f"ranks_model: {j['label']}: {sum(t)} parameters by the GCN's shapes, the run "
                 f"reports {j['parameters']}")
    return [8] + [4 * x for x in t]


def halo_bytes_per_rank(j):
    """The 4 exchanges' bytes sent by a rank (mean over the ranks)."""
    R = j["ranks"]
    rows = j["remote_rows"] / 2 / R  # remote_rows: both forward exchanges, summed over ranks
    w1, w2 = widths(j)
    return [rows * w * 4 for w in (w1, w2, w2, w1)]


def ring(R, bytes_, alpha, beta):
    if R <= 1:
        return 0.0
    return 2 * (R - 1) * alpha + 2 * (R - 1) / R * bytes_ / beta


def comm_terms(j, halo, allreduce, pcie=None, copy_beta=None):
    """Seconds of one epoch's exchanges. halo, allreduce, pcie: (alpha s, beta B/s) of the link
    carrying the halo rows, the all-reduces, and the host <-> device copies (None: none)."""
    R = j["ranks"]
    Bx = halo_bytes_per_rank(j)
    t_link = sum(halo[0] + b / halo[1] for b in Bx)
    t_copy = sum(2 * b / copy_beta for b in Bx) if copy_beta else 0.0
    t_pcie = 0.0
    if pcie:
        t_pcie = 2 * len(Bx) * pcie[0] + (j["h2d_bytes"] + j["d2h_bytes"]) / pcie[1]
    t_ar = sum(ring(R, p, allreduce[0], allreduce[1]) for p in param_tensors(j))
    return {"link": t_link, "copy": t_copy, "pcie": t_pcie, "allreduce": t_ar,
            "total": t_link + t_copy + t_pcie + t_ar}


def note(text):
    print(textwrap.fill(text, width=100))


def err(pred, meas):
    return 100.0 * (pred - meas) / meas if meas else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(os.path.dirname(__file__), "out", "ranks"))
    ap.add_argument("--gpu-compute-ms", default="5,20,50",
                    help="assumed epoch compute of the whole graph on ONE GPU, ms (not measured "
                         "here); a comma-separated list gives one projection each")
    ap.add_argument("--graph", default=None,
                    help="the run label to project (default: the generated graph's GCN)")
    ap.add_argument("--nodes", type=int, default=4, help="nodes of the network projection")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs of the NVLink projection")
    a = ap.parse_args()
    runs = read_runs(a.out)
    comm = read_comm(a.out)
    machine = open(os.path.join(a.out, "machine.txt")).read().strip()
    cores = int(machine.split()[0])  # of the machine that measured: "N cores, ..."

    # ---- this machine's alpha, beta and copy bandwidth
    a2a = per_size(comm, "alltoallv", 2)
    if len(a2a) < 3:
        sys.exit("ranks_model: comm.tsv has no alltoallv between 2 ranks")
    alpha, beta, rms, rms_big, n_big = fit_alpha_beta(sorted((b, us * 1e-6) for b, us in a2a.items()))
    cp = per_size(comm, "copy", 2)
    big = [b / (us * 1e-6) for b, us in cp.items() if b >= 4 << 20]
    copy_beta = statistics.median(big) if big else None
    rounds = len({r["round"] for r in comm if r["op"] == "alltoallv" and r["ranks"] == 2})
    print(f"model: this machine ({machine}), saga_comm over MPI, host memory")
    print(f"  alpha = {alpha * 1e6:.2f} us (an 8-byte alltoallv), beta = {beta / 1e9:.2f} GB/s "
          f"(the slope over sizes >= 4 MiB): bench_comm alltoallv between 2 ranks, {len(a2a)} "
          f"sizes 8 B..{max(a2a) >> 20} MiB, medians of {rounds} rounds; RMS relative error of "
          f"the fit {100 * rms_big:.0f}% over the {n_big} sizes >= 4 MiB, {100 * rms:.0f}% over all")
    print("  measured/fitted us: " + "  ".join(
        f"{b}B {us:.1f}/{(alpha + b / beta) * 1e6:.1f}" for b, us in a2a.items()))
    if copy_beta:
        print(f"  beta_copy = {copy_beta / 1e9:.2f} GB/s: bench_comm memcpy on both ranks at once, "
              f"median over sizes >= 4 MiB and rounds")
    ar = per_size(comm, "allreduce", 2)
    if ar:
        print("  allreduce, 2 ranks, measured / ring model: " + "  ".join(
            f"{b}B:{us:.1f}/{ring(2, b, alpha, beta) * 1e6:.1f}us" for b, us in ar.items()
            if b in (8, 2048, 131072, 2097152)))

    # ---- the check: every GCN run with ranks
    compute1 = {}  # (label, parts) -> epoch seconds of one rank with one thread
    for j in runs:
        if j["kind"] == "time" and j["ranks"] == 1 and j["run_threads"] == 1:
            compute1.setdefault((j["label"], j["parts"]), []).append(j["epoch_ms_median"] * 1e-3)
    compute1 = {k: statistics.median(v) for k, v in compute1.items()}
    groups = {}
    for j in runs:
        # the timed rounds, and the single runs with more ranks than cores (bytes section)
        if "epoch_ms_median" in j and j["ranks"] >= 2 and (
                j["kind"] == "time" or (j["ranks"] > cores and j["label"].startswith("gcn gen"))):
            groups.setdefault((j["kind"], j["label"], j["ranks"], j["partition"]), []).append(j)
    print()
    print("check, GCN, one epoch: predicted against measured (comm: the slowest rank's exchange "
          "time, waits included; medians over the n runs)")
    print(f"{'kind':<5} {'run':<14} {'R':>2} {'partition':<10} {'n':>2} {'comm':>8} {'pred':>8} "
          f"{'err':>5} {'epoch':>8} {'pred1':>8} {'err':>5} {'pred2':>8} {'err':>5} "
          f"{'pred3':>8} {'err':>5}")

    def col(pred, meas):
        if pred is None:
            return f"{'-':>8} {'-':>5}"
        return f"{pred * 1e3:>8.1f} {err(pred, meas):>+4.0f}%"

    for (kind, label, R, part), js in groups.items():
        cm = statistics.median(j["comm_seconds"] for j in js)
        em = statistics.median(j["epoch_ms_median"] for j in js) * 1e-3
        al, be = alpha, beta
        aR = per_size(comm, "alltoallv", R)
        if R != 2 and len(aR) >= 3:
            # oversubscribed ranks: the alpha/beta of bench_comm at that rank count
            al, be, _, _, _ = fit_alpha_beta(sorted((b, us * 1e-6) for b, us in aR.items()))
        pc = comm_terms(js[0], (al, be), (al, be), None, copy_beta)["total"]
        share = min(R, cores)
        t_mem = compute1.get((label, 1))
        t_parts = compute1.get((label, 2))
        p1 = t_mem / share + pc if t_mem else None
        p2 = t_parts / share + pc if t_parts else None
        p3 = (em - cm) + pc
        print(f"{kind:<5} {label:<14} {R:>2} {part:<10} {len(js):>2} {cm * 1e3:>8.1f} "
              f"{col(pc, cm)} {em * 1e3:>8.1f} {col(p1, em)} {col(p2, em)} {col(p3, em)}")
    note(f"(ms. pred1: T_compute(1) / min(R, {cores} cores) + comm pred, T_compute(1) the epoch of "
          f"1 rank with 1 thread in memory; pred2: the same with T_compute(1) of 1 rank with 1 "
          f"thread and the graph in 2 parts (--stream --parts 2), the executor's path with ranks; "
          f"pred3: the run's own epoch less its measured comm, + comm pred (the communication "
          f"model alone). R > {cores}: the ranks share the cores, alpha/beta fitted to bench_comm "
          f"at that R, pred2 still from 2 parts; their comm includes waiting for descheduled "
          f"ranks)")

    # ---- projections for the generated graph
    label = a.graph
    if not label:
        gens = sorted({j["label"] for j in runs if j["label"].startswith("gcn gen")})
        label = gens[0] if gens else None
    byR = {j["ranks"]: j for j in runs
           if j["kind"] == "bytes" and j["label"] == label and j["partition"] == "metis"}
    if not byR:
        print("\nno METIS runs of the generated graph to project")
        return
    nv, pc5, nt = NOMINAL["nvlink"], NOMINAL["pcie5"], NOMINAL["net100"]

    def link(n):
        return n["alpha_us"] * 1e-6, n["beta_gbs"] * 1e9

    print()
    print(f"projection: {label}, one training epoch, from the bytes measured here (METIS parts). "
          f"Link figures are NOMINAL, not measured:")
    for n in (nv, nt, pc5):
        print(f"  {n['what']}")
    print(f"  host side as measured on this machine: MPI alpha {alpha * 1e6:.2f} us, beta "
          f"{beta / 1e9:.2f} GB/s; copy {(copy_beta or 0) / 1e9:.2f} GB/s")
    cases = []
    if a.gpus in byR:
        j = byR[a.gpus]
        cases.append(("A", f"{a.gpus} GPUs, one node: halo device to device over NVLink", j,
                      comm_terms(j, link(nv), link(nv), None, None)))
        cases.append(("B", f"{a.gpus} GPUs, one node, as saga runs today", j,
                      comm_terms(j, (alpha, beta), link(nv), link(pc5), copy_beta)))
    if a.nodes in byR:
        j = byR[a.nodes]
        cases.append(("C", f"{a.nodes} nodes x 1 GPU, 100 Gb/s: halo device to device", j,
                      comm_terms(j, link(nt), link(nt), None, None)))
        cases.append(("D", f"{a.nodes} nodes x 1 GPU, 100 Gb/s, as saga runs today", j,
                      comm_terms(j, link(nt), link(nt), link(pc5), copy_beta)))
    gpu_ms = [float(x) for x in a.gpu_compute_ms.split(",") if x]
    print(f"{'':<2} {'case':<52} {'R':>2} {'halo MB':>8} {'link':>7} {'copy':>7} {'pcie':>7} "
          f"{'allred':>7} {'comm':>7}  " + " ".join(f"{'T1=' + format(g, 'g'):>8}" for g in gpu_ms))
    print(f"{'-':<2} {'1 GPU, no exchanges':<52} {1:>2} {0:>8.1f} " +
          " ".join(f"{0:>7.2f}" for _ in range(5)) + "  " +
          " ".join(f"{g:>8.2f}" for g in gpu_ms))
    for key, name, j, t in cases:
        R = j["ranks"]
        mb = sum(halo_bytes_per_rank(j)) / 1e6
        print(f"{key:<2} {name:<52} {R:>2} {mb:>8.1f} " +
              " ".join(f"{t[k] * 1e3:>7.2f}" for k in ("link", "copy", "pcie", "allreduce", "total"))
              + "  " + " ".join(f"{g / R + t['total'] * 1e3:>8.2f}" for g in gpu_ms))
    note("(ms per epoch. halo MB: the bytes one rank sends in the 4 halo exchanges of an epoch; "
          "link: those exchanges on the link; copy: packing and unpacking them on the host; pcie: "
          "a rank's host <-> device bytes per epoch as the executor moved them here (h2d + d2h); "
          "allred: the loss and the 4 gradient all-reduces, ring. T1=X: the epoch if the whole "
          "graph's compute took X ms on one GPU in the executor's multi-part path (an "
          "assumption, not measured): X / R + comm, nothing overlapped. B: halo rows GPU -> host -> "
          "MPI over shared memory (this machine's alpha, beta, copy) -> GPU, gradients over NVLink (NCCL); D: halo rows through host "
          "memory and the network)")


if __name__ == "__main__":
    main()
