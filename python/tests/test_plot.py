"""Tests of saga.plot that need no saga binary: reading logs, detecting their kind, the errors,
and (where matplotlib is installed) the size of the pictures. The pictures of real runs are
checked by tests/cli_plot.sh.

    python3 -m unittest discover -s python/tests -p test_plot.py
"""

import importlib.util
import json
import os
import struct
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "saga", "plot.py")

# plot.py by its path: saga/__init__.py may need the compiled extension, plot.py does not
_spec = importlib.util.spec_from_file_location("saga_plot", SCRIPT)
plot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plot)

try:
    import matplotlib  # noqa: F401

    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False
# CI must draw: there a missing matplotlib fails the drawing test instead of skipping it
DRAW = HAVE_MPL or os.environ.get("CI") == "true"


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert head[12:16] == b"IHDR", "no IHDR chunk first"
    return struct.unpack(">II", head[16:24])


def svg_size_pt(path):
    root = ET.parse(path).getroot()
    w, h = root.get("width"), root.get("height")
    assert w.endswith("pt") and h.endswith("pt"), (w, h)
    return float(w[:-2]), float(h[:-2])


class PlotTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, lines):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            for obj in lines:
                f.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
        return path

    def training(self):
        return self.write("train.jsonl", [
            {"epoch": e, "loss": 1.0 / e, "train_accuracy": 0.1 * e, "val_accuracy": 0.08 * e,
             "test_accuracy": 0.07 * e, "epoch_ms": 1.0, "eval_ms": 0.5} for e in range(1, 6)])

    def test_plot_detects_each_kind(self):
        cases = {
            "training": [{"epoch": 1, "loss": 0.5}],
            "timeline": [{"trace": "compute", "stream": "compute", "plan": 1, "step": 0,
                          "start": 0.0, "end": 1.0}],
            "hep": [{"threshold": 0.5, "edge_efficiency": 0.9, "edge_purity": 0.8,
                     "false_positive_rate": 0.1}],
            "partition": [{"sizes": [3, 4], "halos": [1, 2]}],
        }
        for kind, lines in cases.items():
            path = self.write(kind + ".jsonl", lines)
            self.assertEqual(plot.detect_kind(path, plot.read_log(path)), kind)

    def test_plot_empty_log_is_an_error(self):
        path = self.write("empty.jsonl", ["", "  "])
        with self.assertRaisesRegex(plot.PlotError, "empty: no JSON lines"):
            plot.read_log(path)

    def test_plot_bad_line_names_it(self):
        path = self.write("bad.jsonl", [{"epoch": 1, "loss": 1}, "not json"])
        with self.assertRaisesRegex(plot.PlotError, r"bad\.jsonl:2: expected a JSON object"):
            plot.read_log(path)

    def test_plot_unknown_log_lists_keys(self):
        path = self.write("unknown.jsonl", [{"alpha": 1, "beta": 2}])
        with self.assertRaisesRegex(plot.PlotError, "unknown log: line 1 has keys alpha, beta"):
            plot.detect_kind(path, plot.read_log(path))

    def test_plot_kind_not_in_log(self):
        path = self.training()
        with self.assertRaisesRegex(plot.PlotError, "no hep lines"):
            plot.plot(path, os.path.join(self.dir, "x.png"), kind="hep")

    def test_plot_overlap_measure(self):
        # copies [0,2] and [3,4] against computes [1,3.5]: 1 + 0.5 of 3 seconds lie under compute
        cover = plot.union([(1.0, 2.0), (1.5, 3.5)])
        self.assertEqual(cover, [[1.0, 3.5]])
        self.assertAlmostEqual(plot.covered([(0.0, 2.0), (3.0, 4.0)], cover), 1.5)

    def test_plot_usage_errors(self):
        for argv in (["x.jsonl", "-o", "x.gif"], ["x.jsonl"], ["x.jsonl", "-o", "x.png", "--width", "1"],
                     ["x.jsonl", "-o", "x.png", "--plans", "3:1"]):
            with self.assertRaises(SystemExit) as cm:
                with open(os.devnull, "w") as null:
                    saved, sys.stderr = sys.stderr, null
                    try:
                        plot.parse_args(argv)
                    finally:
                        sys.stderr = saved
            self.assertEqual(cm.exception.code, 2, argv)

    @unittest.skipUnless(DRAW, "matplotlib is not installed (apt-get install python3-matplotlib)")
    def test_plot_png_and_svg_sizes(self):
        path = self.training()
        png = os.path.join(self.dir, "t.png")
        svg = os.path.join(self.dir, "t.svg")
        self.assertEqual(plot.plot(path, png, width=640, height=360), "training")
        self.assertEqual(png_size(png), (640, 360))
        plot.plot(path, svg, width=640, height=360)
        self.assertEqual(svg_size_pt(svg), (640 * 72 / 100, 360 * 72 / 100))


if __name__ == "__main__":
    unittest.main()
