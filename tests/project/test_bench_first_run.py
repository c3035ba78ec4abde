"""bench/runs/bench_first_run.py reads the docs' first-run figures from what `./run.sh all` prints: the
validation table, the cross-fitted line, the time per step and the budget line. A change to that
output must fail here, not leave a results file with an empty table (the run itself is too long for
the suite: the parser reads a log of its shape)."""

from __future__ import annotations

from helpers import bench_on_path

bench_on_path()
import bench_first_run  # noqa: E402

LOG = """\
[all] budget 4m30s: about 1m06s for data, features, LightGBM and predictions, 3m of neural training
[gnn layout:nlp:random] 120 steps in 0.5 min, stopped: max_steps; best 0.6738 at step 120
[gnn tile:xla] 600 steps in 0.1 min, stopped: time budget; best 0.9332 at step 490
==============================================================================
SYNTHETIC DATA: validation scores below are not Kaggle scores.
Validation scores (Kendall tau for layout, 2 - slowdown for tile):
model          tile:xla  xla:default      overall
random          -0.0199       0.0133       0.0074
ensemble         0.9994       0.3581       0.5940
ensemble: weights fitted on valid, so its valid score is in-sample; cross-fitted (half/half): tile:xla 0.9994, xla:default 0.3410
report:     /tmp/x/reports/validation.md
time per step:
  prepare                        4.6 s
  train gnn                     50.1 s
  total                        139.9 s
total 2m20s: 10s under the budget of 2m30s (93% used)
"""


def test_the_parser_reads_what_all_prints() -> None:
    found = bench_first_run.parse(LOG)
    table = found["validation"]
    assert table["columns"] == ["tile:xla", "xla:default", "overall"]
    assert table["rows"]["random"]["tile:xla"] == -0.0199 and table["rows"]["ensemble"]["overall"] == 0.594
    assert table["cross_fitted"] == {"tile:xla": 0.9994, "xla:default": 0.341}
    assert found["steps_s"] == {"prepare": 4.6, "train gnn": 50.1, "total": 139.9}
    assert found["budget_line"] == "total 2m20s: 10s under the budget of 2m30s (93% used)"
    assert found["synthetic"] and len(found["plan"]) == 1
    assert [(g["collection"], g["steps"], g["stopped"]) for g in found["gnn"]] == [
        ("layout:nlp:random", 120, "max_steps"),
        ("tile:xla", 600, "time budget"),
    ]


def test_a_run_that_printed_no_table_gives_an_empty_one() -> None:
    found = bench_first_run.parse("[setup] installing requirements into .venv\nTraceback ...\n")
    assert found["validation"] == {} and found["steps_s"] == {} and found["budget_line"] is None
