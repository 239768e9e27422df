"""Pictures from saga's JSON-lines logs, as PNG or SVG (matplotlib, Agg backend).

    python3 python/saga/plot.py LOG -o FILE.png|FILE.svg [--kind auto|training|timeline|hep|partition]
    python3 -m saga.plot LOG -o FILE.svg          (where the saga package imports)
    saga plot LOG -o FILE.png                     (runs this file)

The kind of picture follows from the log's keys:

  training   saga gcn --log FILE: loss and train/val/test accuracy per epoch
  timeline   saga gcn|pagerank --trace FILE: the block scheduler's copies against its computes
  hep        saga hep eval --log FILE: efficiency and purity against the threshold, ROC curve
  partition  saga partition --json (stdout): each part's size and halo

It needs matplotlib and nothing of saga's compiled code. Exit status: 0 ok, 1 error (an
unreadable, empty or unknown log, matplotlib missing), 2 wrong usage.
"""

import argparse
import json
import os
import sys

KINDS = ("training", "timeline", "hep", "partition")

# Default picture size in pixels, at DPI dots per inch (an SVG is the same size in inches).
WIDTH, HEIGHT, DPI = 960, 540, 100


class PlotError(Exception):
    """An error in the input: reported as 'saga plot: MESSAGE', exit status 1. status names it
    as saga's --json errors do."""

    def __init__(self, message, status="SAGA_ERR_PARSE"):
        super().__init__(message)
        self.status = status


def read_log(path):
    """The JSON objects of a JSON-lines file, with their line numbers. Blank lines are skipped;
    anything else that is not a JSON object is an error naming the line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise PlotError(f"cannot read '{path}': {e.strerror}", "SAGA_ERR_IO") from None
    except UnicodeDecodeError:
        raise PlotError(f"{path}: not a text file (expected JSON lines)") from None
    records = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise PlotError(f"{path}:{no}: expected a JSON object, got '{line[:60]}' ({e.msg})") from None
        if not isinstance(obj, dict):
            raise PlotError(f"{path}:{no}: expected a JSON object, got {type(obj).__name__}")
        records.append((no, obj))
    if not records:
        raise PlotError(f"{path}: empty: no JSON lines to plot")
    return records


def is_training(r):
    return "epoch" in r and "loss" in r


def is_timeline(r):
    return r.get("trace") in ("copy", "compute")


def is_hep(r):
    return "threshold" in r and "false_positive_rate" in r


def is_partition(r):
    return "sizes" in r and "halos" in r


TESTS = {"training": is_training, "timeline": is_timeline, "hep": is_hep, "partition": is_partition}
EXPECTED = {
    "training": "saga gcn --log lines (epoch, loss, ...)",
    "timeline": 'saga gcn or pagerank --trace lines ("trace": "copy" or "compute")',
    "hep": "saga hep eval --log lines (threshold, edge_efficiency, false_positive_rate)",
    "partition": "a saga partition --json line (sizes, halos)",
}


def detect_kind(path, records):
    for kind in KINDS:
        if any(TESTS[kind](r) for _, r in records):
            return kind
    keys = ", ".join(sorted(records[0][1].keys())[:12]) or "none"
    raise PlotError(
        f"{path}: unknown log: line {records[0][0]} has keys {keys}; expected "
        + "; or ".join(EXPECTED[k] for k in KINDS)
    )


def select(path, records, kind):
    rows = [r for _, r in records if TESTS[kind](r)]
    if not rows:
        raise PlotError(f"{path}: no {kind} lines in it: expected {EXPECTED[kind]}")
    return rows


def number(path, r, key):
    v = r.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise PlotError(f"{path}: '{key}' should be a number, got {json.dumps(v)[:40]}")
    return v


# ---- the pictures -----------------------------------------------------------------------------


def plot_training(plt, fig, path, rows):
    rows = sorted(rows, key=lambda r: r["epoch"])
    ep = [number(path, r, "epoch") for r in rows]
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(ep, [number(path, r, "loss") for r in rows], color="tab:red")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("training loss")
    ax1.set_title("loss")
    ax1.grid(alpha=0.3)
    for key, label, color in (
        ("train_accuracy", "train", "tab:blue"),
        ("val_accuracy", "validation", "tab:orange"),
        ("test_accuracy", "test", "tab:green"),
    ):
        ys = [number(path, r, key) for r in rows]
        if any(y is not None for y in ys):
            ax2.plot(ep, [float("nan") if y is None else y for y in ys], label=label, color=color)
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("accuracy")
    ax2.set_ylim(0, 1)
    ax2.set_title("accuracy (after each epoch)")
    ax2.grid(alpha=0.3)
    ax2.legend(loc="lower right")
    last = rows[-1]
    fig.suptitle(
        f"{os.path.basename(path)}: {len(rows)} epochs, final loss {last['loss']:.4g}"
        + (f", test accuracy {last['test_accuracy']:.4f}" if "test_accuracy" in last else "")
    )


def union(spans):
    """The union of (start, end) intervals, as sorted disjoint intervals."""
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def covered(spans, cover):
    """Seconds of spans that lie inside the union cover."""
    total = 0.0
    for a, b in spans:
        for c, d in cover:
            lo, hi = max(a, c), min(b, d)
            if hi > lo:
                total += hi - lo
    return total


def plot_timeline(plt, fig, path, rows):
    for r in rows:
        for key in ("start", "end", "plan", "step"):
            if number(path, r, key) is None:
                raise PlotError(f"{path}: a trace line lacks '{key}'")
    t0 = min(r["start"] for r in rows)
    ms = lambda t: (t - t0) * 1e3  # noqa: E731
    lanes = [("compute", "compute", "tab:blue"), ("h2d", "copy host->device", "tab:orange"),
             ("d2h", "copy device->host", "tab:green")]
    lane_of = lambda r: "compute" if r["trace"] == "compute" else r.get("dir", "h2d")  # noqa: E731
    ax = fig.subplots(1, 1)
    ys = []
    for i, (lane, label, color) in enumerate(lanes):
        spans = [(ms(r["start"]), ms(r["end"]) - ms(r["start"])) for r in rows if lane_of(r) == lane]
        y = len(lanes) - 1 - i
        ys.append((y, label))
        if spans:
            # steps apart by a thin white line; copies, often narrower than one, without one
            edge = ("white", 0.3) if lane == "compute" else ("none", 0)
            ax.broken_barh(spans, (y - 0.35, 0.7), facecolors=color, edgecolors=edge[0],
                           linewidth=edge[1])
    # plan boundaries: where each plan's first compute starts
    firsts = {}
    for r in rows:
        if r["trace"] == "compute":
            firsts[r["plan"]] = min(firsts.get(r["plan"], float("inf")), ms(r["start"]))
    for p, x in sorted(firsts.items()):
        ax.axvline(x, color="gray", linewidth=0.5, linestyle=":")
    ax.set_yticks([y for y, _ in ys], [label for _, label in ys])
    ax.set_xlabel("milliseconds from the first traced copy or compute")
    ax.set_ylim(-0.7, len(lanes) - 0.3)
    ax.grid(axis="x", alpha=0.3)
    copies = [(r["start"], r["end"]) for r in rows if r["trace"] == "copy"]
    computes = union([(r["start"], r["end"]) for r in rows if r["trace"] == "compute"])
    copy_s = sum(b - a for a, b in copies)
    hidden = covered(copies, computes) / copy_s if copy_s > 0 else 1.0
    n_bytes = sum(r.get("bytes", 0) for r in rows if r["trace"] == "copy")
    n_steps = sum(1 for r in rows if r["trace"] == "compute")
    fig.suptitle(
        f"{os.path.basename(path)}: {n_steps} steps in {len(firsts)} "
        f"plan{'' if len(firsts) == 1 else 's'}, "
        f"{len(copies)} copies ({n_bytes / 1e6:.2f} MB, {copy_s * 1e3:.2f} ms), "
        f"{100 * hidden:.0f}% of copy time under compute"
    )


def plot_hep(plt, fig, path, rows, summary):
    rows = sorted(rows, key=lambda r: r["threshold"])
    th = [number(path, r, "threshold") for r in rows]
    eff = [number(path, r, "edge_efficiency") for r in rows]
    pur = [number(path, r, "edge_purity") for r in rows]
    fpr = [number(path, r, "false_positive_rate") for r in rows]
    if any(v is None for v in eff + fpr):
        raise PlotError(f"{path}: a threshold line lacks edge_efficiency or false_positive_rate")
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(th, eff, label="efficiency", color="tab:blue")
    ax1.plot(th, [float("nan") if p is None else p for p in pur], label="purity", color="tab:red")
    if summary and "threshold" in summary:
        ax1.axvline(summary["threshold"], color="gray", linestyle="--", linewidth=0.8,
                    label=f"threshold {summary['threshold']:g}")
    ax1.set_xlabel("threshold (an edge is kept when its score is above it)")
    ax1.set_ylabel("edge efficiency / purity")
    ax1.set_xlim(0, 1)
    ax1.set_ylim(0, 1.02)
    ax1.set_title("efficiency and purity")
    ax1.grid(alpha=0.3)
    ax1.legend(loc="lower left")
    # the ROC: (fpr, tpr) from the highest threshold down, closed at (0, 0) and (1, 1)
    pts = sorted(set([(0.0, 0.0), (1.0, 1.0)] + list(zip(fpr, eff))))
    auc = summary.get("auc") if summary else None
    ax2.plot([p[0] for p in pts], [p[1] for p in pts], color="tab:purple", marker=".",
             markersize=3, label="ROC" + (f" (AUC {auc:.4f})" if auc is not None else ""))
    ax2.plot([0, 1], [0, 1], color="gray", linestyle=":", linewidth=0.8, label="chance")
    ax2.set_xlabel("false positive rate")
    ax2.set_ylabel("true positive rate (edge efficiency)")
    ax2.set_xlim(0, 1)
    ax2.set_ylim(0, 1.02)
    ax2.set_title("ROC")
    ax2.grid(alpha=0.3)
    ax2.legend(loc="lower right")
    title = os.path.basename(path)
    if summary:
        if "eval_edges" in summary:
            title += f": {summary['eval_edges']} edges"
        if "true_edges" in summary:
            title += f", {summary['true_edges']} true"
    fig.suptitle(title)


def plot_partition(plt, fig, path, r):
    sizes, halos = r["sizes"], r["halos"]
    if not (isinstance(sizes, list) and isinstance(halos, list) and len(sizes) == len(halos)):
        raise PlotError(f"{path}: 'sizes' and 'halos' should be lists of the same length")
    if not sizes:
        raise PlotError(f"{path}: no parts in 'sizes'")
    k = len(sizes)
    ax = fig.subplots(1, 1)
    xs = list(range(k))
    w = 0.4
    ax.bar([x - w / 2 for x in xs], sizes, w, label="part size (vertices)", color="tab:blue")
    ax.bar([x + w / 2 for x in xs], halos, w, label="halo (vertices of other parts with an "
           "edge into it)", color="tab:orange")
    ax.set_xlabel("part")
    ax.set_ylabel("vertices")
    if k <= 32:
        ax.set_xticks(xs)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")
    top = max(max(sizes), max(halos))
    ax.set_ylim(0, top * 1.25 if top else 1)
    title = f"{os.path.basename(str(r.get('input', path)))}: {k} parts"
    if "method" in r:
        title += f" ({r['method']})"
    if "edge_cut" in r and "edges" in r and r["edges"]:
        title += f", edge cut {r['edge_cut']} of {r['edges']} ({100 * r['edge_cut'] / r['edges']:.1f}%)"
    if "balance" in r:
        title += f", balance {r['balance']:.3f}"
    fig.suptitle(title)


# ---- command line -----------------------------------------------------------------------------


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="saga plot",
        description="Draws a PNG or SVG from a saga log: training curves (gcn --log), a "
        "timeline of copies against compute (gcn or pagerank --trace), efficiency, purity and ROC "
        "(hep eval --log), part and halo sizes (partition --json).",
    )
    ap.add_argument("log", metavar="LOG", help="the JSON-lines file")
    ap.add_argument("-o", "--output", metavar="FILE", required=True,
                    help="the picture: FILE.png or FILE.svg")
    ap.add_argument("--kind", choices=("auto",) + KINDS, default="auto",
                    help="what to draw (default: from the log's keys)")
    ap.add_argument("--width", type=int, default=WIDTH, metavar="PX",
                    help=f"width in pixels (default {WIDTH}; an SVG gets the same size in points "
                    f"x {DPI}/72)")
    ap.add_argument("--height", type=int, default=HEIGHT, metavar="PX",
                    help=f"height in pixels (default {HEIGHT})")
    ap.add_argument("--plans", metavar="A:B",
                    help="timeline: only the scheduler's plans A to B (each pass of training is "
                    "one plan; they are counted from 1); other kinds ignore it")
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object: input, output, kind, width, height")
    a = ap.parse_args(argv)
    ext = os.path.splitext(a.output)[1].lower()
    if ext not in (".png", ".svg"):
        ap.error(f"-o must name a .png or .svg file, got '{a.output}'")
    a.format = ext[1:]
    for name in ("width", "height"):
        v = getattr(a, name)
        if not 50 <= v <= 20000:
            ap.error(f"--{name} must be in 50..20000 pixels, got {v}")
    if a.plans is not None:
        try:
            lo, hi = (int(x) for x in a.plans.split(":"))
            if lo > hi:
                raise ValueError
        except ValueError:
            ap.error(f"--plans must be A:B with A <= B, got '{a.plans}'")
        a.plans = (lo, hi)
    return a


def import_pyplot():
    try:
        import matplotlib
    except ImportError:
        raise PlotError(
            f"matplotlib is not installed for {sys.executable}: install python3-matplotlib "
            "(Debian, Ubuntu) or 'pip install matplotlib'",
            "SAGA_ERR_UNSUPPORTED",
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(log, output, kind="auto", width=WIDTH, height=HEIGHT, plans=None):
    """Draws LOG into OUTPUT (.png or .svg); returns the kind drawn. Raises PlotError."""
    records = read_log(log)
    if kind == "auto":
        kind = detect_kind(log, records)
    rows = select(log, records, kind)
    if kind == "timeline" and plans:
        rows = [r for r in rows
                if isinstance(r.get("plan"), int) and plans[0] <= r["plan"] <= plans[1]]
        if not rows:
            raise PlotError(f"{log}: no trace lines in plans {plans[0]}..{plans[1]}")
    plt = import_pyplot()
    fig = plt.figure(figsize=(width / DPI, height / DPI), dpi=DPI, layout="constrained")
    try:
        if kind == "training":
            plot_training(plt, fig, log, rows)
        elif kind == "timeline":
            plot_timeline(plt, fig, log, rows)
        elif kind == "hep":
            summary = next((r for _, r in records if "auc" in r), None)
            plot_hep(plt, fig, log, rows, summary)
        else:
            plot_partition(plt, fig, log, rows[-1])
        ext = os.path.splitext(output)[1].lower()
        try:
            fig.savefig(output, format=ext[1:], dpi=DPI)
        except OSError as e:
            raise PlotError(f"cannot write '{output}': {e.strerror}", "SAGA_ERR_IO") from None
    except (KeyError, TypeError, ValueError) as e:
        raise PlotError(f"{log}: malformed {kind} log ({type(e).__name__}: {e})") from None
    finally:
        plt.close(fig)
    return kind


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        kind = plot(a.log, a.output, a.kind, a.width, a.height, a.plans)
    except PlotError as e:
        print(f"saga plot: {e}", file=sys.stderr)
        if a.json:
            print(json.dumps({"error": str(e), "status": e.status, "exit_code": 1}))
        return 1
    if a.json:
        print(json.dumps({"input": a.log, "output": a.output, "kind": kind, "format": a.format,
                          "width": a.width, "height": a.height, "outputs": [a.output]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
