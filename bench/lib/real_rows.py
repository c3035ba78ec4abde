"""Real-sample rows beside the synthetic rows of the benchmarks that compare recipes.

The synthetic generator shares its physics with some of the features, so a recipe that wins on
synthetic data can lose on the real measurements, and real data decides. Every recipe table therefore
prints, next to a recipe's synthetic rows, its real-sample rows: the per-seed figures that
bench_real.py, bench_recipe_real.py and bench_gst.py saved under bench/results/, or "-" where the
recipe was never measured on real data. Each benchmark names its own small mapping (recipe -> `Real`
measurements); this module reads and formats them, and judges a recipe's real rows against its base's.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
NOT_MEASURED = "real: - (not measured on real data)"
LAYOUT = "real: xla:default unet tau"  # Kendall tau on the real unet_3d.4x4.bf16 graph, all configs
TILE = "real: tile score, 15 kernels"  # 2 - slowdown@5 on the real kernels, kernel-grouped folds
LEGEND = (
    "data: synthetic = this benchmark's rows; real = the same recipe on the real sample (mean ± "
    "population std over seeds, and how it was measured); - = not measured on real data"
)


@dataclass(frozen=True)
class Real:
    """One real-sample measurement of a recipe: the per-seed values at `key` in each results file of
    `files` (their seeds pooled), under the table column `column`. `setting` says how it was
    measured; the real rows of two recipes compare only where their settings are equal."""

    setting: str
    files: tuple[str, ...]
    key: tuple[str, ...]
    column: str = LAYOUT


def layout(files: tuple[str, ...], model: str, setting: str) -> Real:
    """`model`'s tau on all configs of the real unet graph in bench_real.py results files."""
    return Real(setting, files, ("layout", "per_seed", "all", model), LAYOUT)


def tile(files: tuple[str, ...], model: str, setting: str) -> Real:
    """`model`'s tile score over the 15 real kernels in bench_real.py results files."""
    return Real(setting, files, ("tile", "per_seed", model), TILE)


def cell(values: dict[int, float], setting: str) -> str:
    """Mean ± population std over seeds (the synthetic rows' statistics), the seeds, the setting."""
    v = list(values.values())
    n = f"{len(v)} seed{'s' if len(v) != 1 else ''}"
    return f"{statistics.fmean(v):.4f} ± {statistics.pstdev(v):.4f} ({n}; {setting})"


class RealRows:
    """A benchmark's real rows: `mapping` (recipe -> its measurements) read from the first of
    `folders` that holds each results file (bench/results; a folder of new runs not copied yet)."""

    def __init__(self, mapping: dict[str, list[Real]], folders: Sequence[Path] = (RESULTS,)) -> None:
        self.mapping = mapping
        self.folders = [Path(f) for f in folders]
        self._cache: dict[Real, dict[int, float] | None] = {}

    def find(self, name: str) -> Path | None:
        return next((f / name for f in self.folders if (f / name).is_file()), None)

    def values(self, ref: Real) -> dict[int, float] | None:
        """seed -> value of one measurement; None while one of its files is absent (not run or not
        copied yet). A file without `seeds` numbers its values 0, 1, ...; a seed in two files is an
        error of the mapping."""
        if ref not in self._cache:
            self._cache[ref] = self._read(ref)
        return self._cache[ref]

    def _read(self, ref: Real) -> dict[int, float] | None:
        out: dict[int, float] = {}
        origin: dict[int, str] = {}
        for name in ref.files:
            path = self.find(name)
            if path is None:
                return None
            try:
                data = json.loads(path.read_text())
                got = data
                for k in ref.key:
                    got = got[k]
                # a circular ensemble's entries are [score, weights]: the score counts
                got = [float(x[0] if isinstance(x, list) else x) for x in got]
            except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
                raise SystemExit(
                    f"{path}: no per-seed values at {'/'.join(ref.key)} ({type(e).__name__}: {e})"
                ) from None
            seeds = data.get("seeds") if isinstance(data.get("seeds"), list) else None
            for seed, v in zip(
                seeds if seeds and len(seeds) == len(got) else range(len(got)), got, strict=True
            ):
                if seed in out:
                    raise SystemExit(f"{path}: seed {seed} of {'/'.join(ref.key)} is also in {origin[seed]}")
                out[int(seed)], origin[int(seed)] = v, name
        return out or None

    def cells(self, recipe: str, columns: Sequence[str]) -> list[list[str]]:
        """One list of cells (one per real column) for each real row of `recipe`; one row of "-"
        when it has none. An absent results file reads "-" with its name."""
        rows = []
        for ref in self.mapping.get(recipe, []):
            v = self.values(ref)
            text = cell(v, ref.setting) if v else f"- ({ref.files[0]} not found; {ref.setting})"
            rows.append([text if c == ref.column else "" for c in columns])
        return rows or [["-"] * len(columns)]

    def judge(self, recipe: str, base: str) -> str:
        """`recipe`'s real rows against `base`'s of the same setting: "real: lower" where its mean is
        below the base's by more than the larger seed spread (population std) in any setting, "real:
        higher" where above by more, else "real: within the seed spread"; "real: -" when no setting
        holds real rows of both."""
        parts, lower, higher = [], False, False
        for r in self.mapping.get(recipe, []):
            for b in self.mapping.get(base, []):
                if (r.setting, r.column) != (b.setting, b.column) or r == b:
                    continue
                vr, vb = self.values(r), self.values(b)
                if not vr or not vb:
                    continue
                a, s = list(vb.values()), list(vr.values())
                gain = statistics.fmean(s) - statistics.fmean(a)
                spread = max(statistics.pstdev(a), statistics.pstdev(s))
                lower, higher = lower or gain < -spread, higher or gain > spread
                state = "within" if abs(gain) <= spread else "beyond"
                parts.append(
                    f"{r.setting}: {gain:+.4f}, {state} the spread {spread:.4f}, {len(s)} vs {len(a)} seeds"
                )
        if not parts:
            measured = any(self.values(r) for r in self.mapping.get(recipe, []))
            return f"real: - (no real row of {base} in the same setting)" if measured else NOT_MEASURED
        word = "lower" if lower else "higher" if higher else "within the seed spread"
        return f"real: {word} ({'; '.join(parts)})"


def add_option(parser) -> None:
    """The table modes' `--real-dir` option (repeatable; bench/results when absent)."""
    parser.add_argument(
        "--real-dir",
        type=Path,
        action="append",
        help="folder of real-sample results files, searched in order (default bench/results); "
        "repeat it to add a folder of new runs",
    )


def add_table_options(parser, default: Path) -> None:
    """`--table [RESULTS]` (print the table of a saved results file, `default` when none is named,
    and exit) and `--real-dir`."""
    parser.add_argument(
        "--table",
        type=Path,
        nargs="?",
        const=default,
        metavar="RESULTS",
        help=f"print the table of a saved results file (default bench/results/{default.name}) and exit",
    )
    add_option(parser)


def folders(option: list[Path] | None) -> list[Path]:
    return option or [RESULTS]
