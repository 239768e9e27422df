"""predictions.py FILE DATA_DIR JSON - checks a `saga gcn --predictions FILE` run: one "vertex
class" line per vertex of DATA_DIR in vertex order, each class an index of its classes, and the
test accuracy the lines give is the one the run's --json object reports."""
import json
import os
import sys

path, data, jpath = sys.argv[1:4]
j = json.load(open(jpath))
lines = [l.split() for l in open(path)]
assert len(lines) == j["vertices"], (len(lines), j["vertices"])
assert all(len(l) == 2 for l in lines), "lines of two fields"
assert [int(l[0]) for l in lines] == list(range(len(lines))), "vertices out of order"
pred = [int(l[1]) for l in lines]
assert all(0 <= c < j["classes"] for c in pred), "a class out of range"
labels = [int(x) for x in open(os.path.join(data, "labels.txt")).read().split()]
test = [int(x) for x in open(os.path.join(data, "test_idx.txt")).read().split()]
acc = sum(pred[v] == labels[v] for v in test) / len(test)
assert abs(acc - j["test_accuracy"]) < 1e-12, (acc, j["test_accuracy"])
