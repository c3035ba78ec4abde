"""The training curves: the columns of each model's metrics.csv (GNN: training loss every few steps and
each validation; LightGBM: the validation metric per round), what the report reads from them, and a
training log that stays a few lines however often a run validates."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tpurank.core.config_build import from_dict
from tpurank.core.paths import Paths
from tpurank.gnn.data import load_split
from tpurank.gnn.families import gnn as gnn_model
from tpurank.gnn.training import run_log
from tpurank.gnn.training.collection import train_collection
from tpurank.report.curves import read_curve, read_curves

COLLECTION = "layout:xla:random"


def _rows(f: Path) -> list[dict[str, str]]:
    with open(f) as fh:
        return list(csv.DictReader(fh))


def test_loss_rows_leave_the_valid_score_empty(tmp_path: Path) -> None:
    f = tmp_path / run_log.METRICS
    run_log.write_metrics(
        f,
        [
            run_log.curve_row(3, 1.0, 1e-3, [0.5, 0.7]),
            run_log.curve_row(5, 2.0, 5e-4, [0.4], score=0.25),
            {"step": 5, "valid_score": 0.3, "finetune_loss": 0.1},  # GST's fine-tuning record: no row
        ],
    )
    assert f.read_text().splitlines()[0] == ",".join(run_log.METRIC_COLUMNS)
    rows = _rows(f)
    assert [r["step"] for r in rows] == ["3", "5"]
    assert float(rows[0]["train_loss"]) == pytest.approx(0.6) and rows[0]["valid_score"] == ""
    assert float(rows[1]["valid_score"]) == 0.25
    assert read_curve(f) == {
        "step": [3.0, 5.0],
        "train_loss": [pytest.approx(0.6), 0.4],
        "valid_step": [5.0],
        "valid_score": [0.25],
    }


@pytest.mark.parametrize(("steps", "every"), [(1, 1), (100, 1), (101, 2), (4000, 40), (25_000, 250)])
def test_loss_rows_are_about_a_hundred_per_run(steps: int, every: int) -> None:
    assert run_log.loss_interval(steps) == every


@pytest.mark.parametrize(("share", "mark"), [(0.0, 0), (0.09, 0), (0.1, 1), (0.55, 5), (1.0, 10), (1.5, 10)])
def test_a_progress_line_per_tenth_of_the_budget(share: float, mark: int) -> None:
    assert run_log.log_mark(share) == mark


def test_a_gnn_run_records_its_loss_between_validations_and_logs_a_few_lines(
    tiny_paths: Paths, tmp_path: Path, capsys, one_thread
) -> None:
    """Validating every step of 40 used to print 40 lines; now one per tenth of the budget, and
    metrics.csv has a loss row at every step (loss_interval(40) = 1) with the validations among them."""
    train, valid = (load_split(tiny_paths, COLLECTION, s, False) for s in ("train", "valid"))
    cfg = from_dict(
        {
            "gnn": {
                "hidden": 8,
                "layers": 1,
                "opcode_dim": 4,
                "config_dim": 4,
                "seeds": 1,
                "max_steps": 40,
                "eval_every": 1,
                "patience": 1000,
                "warmup_steps": 1,
            }
        }
    )
    paths = Paths(tiny_paths.data, tmp_path)
    summary = train_collection(gnn_model.SPEC, paths, cfg, COLLECTION, train, valid, progress=True)
    out = capsys.readouterr()
    lines = [ln for ln in (out.out + out.err).splitlines() if ln.startswith(f"[gnn {COLLECTION}] step ")]
    assert summary["evals_run"] == 40 and 10 <= len(lines) <= 12, lines
    assert lines[-1].startswith(f"[gnn {COLLECTION}] step 40/40: ") and " at step " in lines[-1]
    rows = _rows(paths.model_dir("gnn", COLLECTION) / run_log.METRICS)
    assert [int(r["step"]) for r in rows] == list(range(1, 41))
    assert all(r["valid_score"] and float(r["train_loss"]) > 0 for r in rows)

    cfg.gnn.eval_every, cfg.gnn.max_steps = 20, 120  # validations far apart: loss rows between them
    other = Paths(tiny_paths.data, tmp_path / "sparse")
    train_collection(gnn_model.SPEC, other, cfg, COLLECTION, train, valid, progress=False)
    rows = _rows(other.model_dir("gnn", COLLECTION) / run_log.METRICS)
    validated = [int(r["step"]) for r in rows if r["valid_score"]]
    assert validated == list(range(20, 121, 20))
    assert [int(r["step"]) for r in rows] == list(range(2, 121, 2))  # loss_interval(120) = 2


def test_lightgbm_writes_its_validation_metric_per_round(tiny_paths: Paths, tmp_path: Path) -> None:
    from tpurank.features.stage import build_features
    from tpurank.lgbm import model

    out = tmp_path / "out"
    (out / "features").mkdir(parents=True)
    (out / "features" / "prepared").symlink_to(tiny_paths.prepared, target_is_directory=True)
    paths = Paths(data=tiny_paths.data, out=out)
    cfg = from_dict(
        {
            "lgbm": {
                "num_boost_round": 40,
                "early_stopping_rounds": 10,
                "min_data_in_leaf": 5,
                "num_leaves": 7,
                "threads": 1,
            }
        }
    )
    build_features(paths, cfg, [COLLECTION], ["train", "valid"])  # what LightGBM reads
    model.train(paths, cfg.for_collection(COLLECTION), COLLECTION)
    folder = paths.model_dir("lgbm", COLLECTION)
    f = folder / model.METRICS_FILE
    assert f.read_text().splitlines()[0] == "round,valid_score"
    info = json.loads((folder / model.PROVENANCE_FILE).read_text())
    curve = read_curve(f)
    assert curve["round"] == [float(i) for i in range(1, info["rounds"] + 1)]
    # the kept round is the best of the curve: what early stopping watched
    assert curve["valid_score"][info["best_iteration"] - 1] == pytest.approx(info["valid_score"])
    assert max(curve["valid_score"]) == pytest.approx(info["valid_score"])
    assert read_curves(paths.models) == {COLLECTION: {"lgbm": curve}}

    model.write_curve(f, [])  # no valid split: the header only, never an older run's rows
    assert f.read_text() == "round,valid_score\n"


def test_unreadable_or_old_files_are_left_out_with_a_line(tmp_path: Path, capsys) -> None:
    models = tmp_path / "models"
    for rel, text in {
        "gnn/tile-xla": "step,elapsed,lr,train_loss,valid_score\n2,1.0,0.001,0.5,0.9\n",
        "baseline/tile-xla": "step,lr,valid_score\n2,0.001,0.9\n",  # no train_loss: another format
        "lgbm/not-a-collection": "round,valid_score\n1,0.5\n",
        "lgbm/tile-xla": "",
    }.items():
        (models / rel).mkdir(parents=True)
        (models / rel / "metrics.csv").write_text(text)
    curves = read_curves(models)
    assert list(curves) == ["tile:xla"] and list(curves["tile:xla"]) == ["gnn"]
    err = capsys.readouterr().err
    assert "baseline/tile-xla/metrics.csv: unreadable" in err and "lgbm/tile-xla/metrics.csv" in err
