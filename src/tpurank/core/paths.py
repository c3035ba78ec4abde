"""Every path tpurank reads or writes is resolved here, and nowhere else.

The data root comes from `--data-dir`, then `$TPURANK_DATA`, then the Kaggle input folder, then
`data/`. Generated outputs live under the project root (or `$TPURANK_HOME`, or `--out-dir`), one
folder per stage. The large intermediates (the prepared cache and the feature tables, `features/`)
can live apart, under `--work-dir` (or `$TPURANK_WORK`): on Kaggle, `/kaggle/temp`, so that only
models, predictions, submissions and reports count against `/kaggle/working`'s 20 GB.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

KAGGLE_INPUT = Path("/kaggle/input/predict-ai-model-runtime")
NPZ_SUBDIR = Path("npz_all/npz")
SAMPLE_SUBMISSION = "sample_submission.csv"

STAGING_PREFIX = ".next-"  # a model folder being (re)trained: hidden, beside the finished one


def checkout_root() -> Path | None:
    """The source checkout this package runs from (the folder holding run.sh), None when installed."""
    here = Path(__file__).resolve().parents[3]  # src/tpurank/core/paths.py -> the checkout
    return here if (here / "run.sh").exists() and (here / "src" / "tpurank").exists() else None


def project_root() -> Path:
    """$TPURANK_HOME, else the source checkout, else the current directory."""
    if home := os.environ.get("TPURANK_HOME"):
        return Path(home).resolve()
    return checkout_root() or Path.cwd().resolve()


def resolve_data_root(data_dir: str | Path | None = None) -> tuple[Path, bool]:
    """(the data root, whether the user named it): `--data-dir`, then $TPURANK_DATA, then Kaggle's
    input folder, then data/."""
    if data_dir:
        return Path(data_dir).expanduser().resolve(), True
    if env := os.environ.get("TPURANK_DATA"):
        return Path(env).expanduser().resolve(), True
    if KAGGLE_INPUT.exists():
        return KAGGLE_INPUT, False
    return project_root() / "data", False


def preset_file(name: str) -> Path:
    """A config preset of configs/ (`cpu-budget.toml`, `demo.toml`): the checkout's, else the copy an
    installed wheel carries as `tpurank.presets`."""
    checkout = checkout_root()
    if checkout is not None:
        return checkout / "configs" / name
    return Path(str(resources.files("tpurank.presets") / name))


@dataclass(frozen=True)
class Paths:
    """The resolved folders of one run. Stage modules take what they need from here.

    Args:
        data: the data root (holds npz_all/npz and sample_submission.csv).
        out: the root of generated outputs (models/, predictions/, submissions/, reports/).
        work: the root of intermediates (features/: the prepared cache and feature tables);
            None = `out`.
        data_named: the user named the data root (`--data-dir`, $TPURANK_DATA): `all` then
            uses it or fails, never falling back to a download or the synthetic demo.
        staging: model folders are the staging folders a (re)training writes into
            (`.next-<collection>` beside each), published only when it completes (rankers/staging.py).
    """

    data: Path
    out: Path
    work: Path | None = None
    data_named: bool = False
    staging: bool = False

    @classmethod
    def resolve(
        cls,
        data_dir: str | Path | None = None,
        out_dir: str | Path | None = None,
        work_dir: str | Path | None = None,
    ) -> Paths:
        """`--data-dir`, `--out-dir` (else the project root) and `--work-dir` (else $TPURANK_WORK,
        else the out folder)."""
        out = Path(out_dir).resolve() if out_dir else project_root()
        work = work_dir or os.environ.get("TPURANK_WORK")
        data, named = resolve_data_root(data_dir)
        return cls(
            data=data, out=out, work=Path(work).expanduser().resolve() if work else None, data_named=named
        )

    def with_data(self, data: Path) -> Paths:
        """The same folders over another data root (`all` once it has found or made the data)."""
        return dataclasses.replace(self, data=data)

    @staticmethod
    def demo_data(scale: str) -> Path:
        """Where `all` generates its synthetic fallback dataset: data/synthetic-<scale>/."""
        return project_root() / "data" / f"synthetic-{scale}"

    @property
    def work_root(self) -> Path:
        """Where intermediates go: `work`, or `out` when none is set."""
        return self.work if self.work is not None else self.out

    @property
    def npz(self) -> Path:
        return self.data / NPZ_SUBDIR

    @property
    def eval_indices(self) -> Path:
        """The official validation subsets, where the data root has them (the TpuGraphs release does)."""
        return self.data / "eval_indices"

    @property
    def sample_submission(self) -> Path:
        return self.data / SAMPLE_SUBMISSION

    @property
    def features(self) -> Path:
        """Intermediates: the prepared cache and the feature tables (under the work folder)."""
        return self.work_root / "features"

    @property
    def prepared(self) -> Path:
        """Stage 1 cache: one compact file per graph plus index.parquet."""
        return self.features / "prepared"

    @property
    def tabular(self) -> Path:
        """Tabular feature tables for LightGBM."""
        return self.features / "tabular"

    @property
    def models(self) -> Path:
        return self.out / "models"

    @property
    def predictions(self) -> Path:
        return self.out / "predictions"

    @property
    def submissions(self) -> Path:
        return self.out / "submissions"

    @property
    def reports(self) -> Path:
        return self.out / "reports"

    def model_dir(self, model: str, collection: str) -> Path:
        name = collection.replace(":", "-")
        return self.models / model / (f"{STAGING_PREFIX}{name}" if self.staging else name)

    def prediction_file(self, model: str, split: str) -> Path:
        return self.predictions / model / f"{split}.npz"
