"""`tpurank runs [OUT ...]`: runs side by side (default: --out-dir), newest first.

First a pivot: one row per run and model, its validation score per collection and overall (every
config of every valid graph, as `predict` scored it into its sidecar; a fitted ensemble's row is
labelled in-sample: its weights were fitted on those graphs), the model's training time (m:ss, seed
members and every collection summed), the run's dataset (synthetic or real, and the data root's
folder name) and profile. Then the config keys that differ between the runs and the commit and data
each came from. Everything is read from the files the runs left: the provenance sidecars
(`submissions/valid_<model>.json`, `models/<model>/<collection>/model.json` or `provenance.json`,
seed members' in `seed-k/`, and `reports/validation.json`). Where the run's `reports/validation.md`
shows other figures (layout graphs scored on the official subsets, the cross-fitted ensemble), a
note under the pivot says so.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tpurank.core.collections import COLLECTIONS
from tpurank.core.config_build import with_new_names
from tpurank.core.declared import ENSEMBLE
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths, synthetic_scale
from tpurank.models.registry import MODEL_NAMES
from tpurank.models.weights import WEIGHTS_FILE
from tpurank.report.config_show import flat

COLUMNS = (*COLLECTIONS, "overall")
SIDECARS = ("model.json", "provenance.json")
IN_SAMPLE = "ensemble (in-sample)"  # the fitted ensemble's row, labelled as in the report (report.validation)
SCORED = "every config of every valid graph, as `predict` scored it"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("outs", nargs="*", type=Path, metavar="OUT", help="out folders (default: --out-dir)")


def _json(f: Path) -> dict[str, Any]:
    try:
        rec = json.loads(f.read_text())
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def dataset(data_root: str | None, report: dict[str, Any]) -> str:
    """`synthetic <scale>: <folder>` or `real: <folder>`: what the validation report recorded, else
    what the data root holds now (a synth.json), `?` when neither tells."""
    if not data_root:
        return "?"
    name = Path(data_root).name or str(data_root)
    if "synthetic_scale" in report:
        scale = report["synthetic_scale"]
        return f"synthetic {scale}: {name}" if scale else f"real: {name}"
    if not Path(data_root).is_dir():
        return f"?: {name}"
    scale = synthetic_scale(Path(data_root))
    return f"synthetic {scale}: {name}" if scale else f"real: {name}"


def read_run(out: Path) -> dict[str, Any]:
    """What one out folder tells: config (flat), scores per model, training seconds per model, when
    it was written (newest sidecar), profile, dataset, commit and data fingerprint.

    Raises:
        TpurankError: when the folder holds no validation results or trained models.
    """
    paths = Paths(data=out, out=out)  # only its out folders are read
    scored = paths.submitted("valid", ".json")
    sides = list(scored.values())
    models = sorted(f for f in paths.models.glob("*/*/**/*.json") if f.name in SIDECARS)
    models = [f for f in models if not any(p.startswith(".") for p in f.relative_to(paths.models).parts)]
    if not sides and not models:
        raise TpurankError(f"{out}: no run here (no submissions/valid_*.json, no trained model)")
    report = _json(paths.reports / "validation.json")
    run: dict[str, Any] = {
        "config": {},
        "scores": {},
        "seconds": {},
        "created": "",
        "profile": "-",
        "commit": "?",
        "data": "?",
        "dataset": "?",
        "report": report_note(report),
        "fitted": any((paths.models / ENSEMBLE).glob(f"*/{WEIGHTS_FILE}")),
    }
    for f in [*sides, *models]:
        rec = _json(f)
        run["created"] = max(run["created"], str(rec.get("created_utc", "")))
        if isinstance(rec.get("config"), dict) and not run["config"]:
            run.update(
                config=flat(with_new_names(rec["config"])),  # an older run's keys as named now
                profile=str(rec["config"].get("profile", "-")),
                commit=rec.get("git_commit", "?"),
                data=rec.get("data_fingerprint", "?"),
                dataset=dataset(rec.get("data_root"), report),
            )
    for model, f in scored.items():
        scores = _json(f).get("scores") or {}
        run["scores"][model] = {
            c: float(v) for c, v in scores.items() if c in COLUMNS and isinstance(v, int | float)
        }
    for f in models:
        seconds = _json(f).get("seconds")
        if isinstance(seconds, int | float):
            model = f.relative_to(paths.models).parts[0]
            run["seconds"][model] = run["seconds"].get(model, 0.0) + float(seconds)
    return run


def report_note(report: dict[str, Any]) -> str:
    """Why the run's `reports/validation.md` shows other layout figures than the pivot ("" when it
    shows the same): it scored layout graphs on the official subsets, or on all their configs."""
    if report.get("all_configs") is True:
        return (
            "reports/validation.md scored every config of every graph (--all-configs; here a layout "
            "graph of more than 1,000 is scored on 1,000)"
        )
    if not report.get("official_subsets"):
        return ""
    cov = report.get("official_subsets_coverage")
    if isinstance(cov, dict) and cov.get("on_subset") == 0:
        return ""  # no graph of the data was in the subsets: the same figures
    if isinstance(cov, dict):
        n, k = cov.get("layout_graphs"), cov.get("on_subset")
        return f"reports/validation.md scored {k} of {n} layout graphs on their official subsets"
    return "reports/validation.md scored layout graphs on the official subsets (--official-subsets)"


def _fmt(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def minutes(seconds: float | None) -> str:
    """Seconds as `m:ss` (`-` for none)."""
    if seconds is None:
        return "-"
    total = round(seconds)
    return f"{total // 60}:{total % 60:02d}"


def labels(outs: list[Path]) -> list[str]:
    """Run names: each run folder's name, or as many of its last path parts as tell the runs apart
    (`early-stop/seed-0` beside `features/seed-0`)."""
    parts = [Path(o).resolve().parts for o in outs]
    for n in range(1, max(len(p) for p in parts) + 1):
        names = ["/".join(p[-n:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [str(o) for o in outs]  # the same folder twice


def newest_first(names: list[str], runs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The runs by the time of their newest sidecar, newest first (a stable sort: ties keep the order
    given on the command line)."""
    return sorted(zip(names, runs, strict=True), key=lambda nr: nr[1]["created"], reverse=True)


def model_order(models: set[str]) -> list[str]:
    """The registry's order (the untrained rankers first, the ensemble last), then any other name."""
    return [m for m in MODEL_NAMES if m in models] + sorted(models - set(MODEL_NAMES))


def pivot(ordered: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """One line per run and model (runs as ordered, models in registry order): scores per collection
    and overall, training m:ss, data, profile, and when the run wrote its newest file."""
    models = [model_order(set(r["scores"]) | set(r["seconds"])) for _, r in ordered]
    shown = [[label(m, r) for m in ms] for (_, r), ms in zip(ordered, models, strict=True)]
    name_w = max([3, *(len(n) for n, _ in ordered)])
    model_w = max([5, *(len(m) for ms in shown for m in ms)])
    heads = [c.removeprefix("layout:") for c in COLUMNS]
    head = f"{'run':<{name_w}}  {'model':<{model_w}}" + "".join(f"{h:>13}" for h in heads)
    lines = [head + f"{'train':>8}  {'data':<24} {'profile':<10} created (UTC)"]
    for (name, r), ms in zip(ordered, models, strict=True):
        for m in ms:
            vals = [r["scores"].get(m, {}).get(c) for c in COLUMNS]
            cells = "".join(f"{'-' if v is None else f'{v:.4f}':>13}" for v in vals)
            lines.append(
                f"{name:<{name_w}}  {label(m, r):<{model_w}}{cells}{minutes(r['seconds'].get(m)):>8}  "
                f"{r['dataset']:<24} {r['profile']:<10} {r['created'][:16].replace('T', ' ') or '?'}"
            )
    return lines


def label(model: str, run: dict[str, Any]) -> str:
    """The pivot's name of a model's row: a fitted ensemble's score is in-sample, as the report says."""
    return IN_SAMPLE if model == "ensemble" and run.get("fitted") else model


def notes(ordered: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """What the pivot's figures are, and where a run's report shows others."""
    out = []
    if any(r.get("fitted") and "ensemble" in r["scores"] for _, r in ordered):
        out.append(
            f"{IN_SAMPLE}: its weights were fitted on these valid graphs (optimistic); the cross-fitted "
            "estimate is the row below it in reports/validation.md"
        )
    for name, r in ordered:
        if r.get("report"):
            out.append(f"{name}: {r['report']}, so its layout and overall figures differ from these")
    return out


def table(outs: list[Path], runs: list[dict[str, Any]]) -> str:
    """The pivot, then what differs in the configs and the sources (one column per run, newest first)."""
    ordered = newest_first(labels(outs), runs)
    lines = [f"-- validation score per model and collection: {SCORED} (runs newest first)", *pivot(ordered)]
    lines += [f"note: {n}" for n in notes(ordered)]
    names = [n for n, _ in ordered]
    width = max(14, *(len(n) for n in names))
    header = f"{'':<34}" + "".join(f"{n:>{width + 2}}" for n in names)

    def section(title: str, keys: list[str], get: Any) -> None:
        if keys:
            lines.extend(["", f"-- {title}", header])
            for k in keys:
                lines.append(f"{k:<34}" + "".join(f"{_fmt(get(r, k)):>{width + 2}}" for _, r in ordered))

    keys = sorted({k for _, r in ordered for k in r["config"]})
    differ = [k for k in keys if len({json.dumps(r["config"].get(k), default=str) for _, r in ordered}) > 1]
    section("config (keys that differ)", differ, lambda r, k: r["config"].get(k, "-"))
    section("source", ["commit", "data"], lambda r, k: str(r[k])[:12])
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    outs = [Path(o) for o in args.outs] or [args.paths.out]
    print(table(outs, [read_run(o) for o in outs]))
    return 0
