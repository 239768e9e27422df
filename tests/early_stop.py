"""early_stop.py LOG JSON PATIENCE EPOCHS - checks a `saga gcn --early-stop PATIENCE --epochs
EPOCHS` run from its --log lines and its --json object: training ended at the first epoch
PATIENCE epochs after the best validation accuracy so far (the first epoch of it), or after
EPOCHS; the final model is the best epoch's (its accuracies as the log gave them)."""
import json
import sys

log = [json.loads(l) for l in open(sys.argv[1])]
j = json.load(open(sys.argv[2]))
P, E = int(sys.argv[3]), int(sys.argv[4])
assert [x["epoch"] for x in log] == list(range(1, len(log) + 1)), "epochs logged out of order"
best, end = None, E
for x in log:
    if best is None or x["val_accuracy"] > best["val_accuracy"]:
        best = x
    if x["epoch"] - best["epoch"] >= P:
        end = x["epoch"]
        break
assert len(log) == end == j["epochs"], (len(log), end, j["epochs"])
assert j["stopped"] == (end < E) and j["early_stop"] == P, j
assert j["model_epoch"] == j["best_epoch"] == best["epoch"], (j["model_epoch"], best["epoch"])
keys = ("train_accuracy", "val_accuracy", "test_accuracy")
last = log[-1]
# the check has power: where training stopped, the last epoch's model scores otherwise than the
# best one's
assert not j["stopped"] or any(last[k] != best[k] for k in keys), "best and last score alike"
for k in keys:
    assert j[k] == best[k], (k, j[k], best[k])
