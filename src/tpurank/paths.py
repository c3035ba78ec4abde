"""Every path tpurank reads or writes is resolved here, and nowhere else.

The data root comes from `--data-dir`, then `$TPURANK_DATA`, then the Kaggle input folder, then
`data/`. Generated outputs live under the project root (or `$TPURANK_HOME`, or `--out-dir`), one
folder per stage. The large intermediates (the prepared cache and the feature tables, `features/`)
can live apart, under `--work-dir` (or `$TPURANK_WORK`): on Kaggle, `/kaggle/temp`, so that only
models, predictions, submissions and reports count against `/kaggle/working`'s 20 GB.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

KAGGLE_INPUT = Path("/kaggle/input/predict-ai-model-runtime")
NPZ_SUBDIR = Path("npz_all/npz")
SAMPLE_SUBMISSION = "sample_submission.csv"


def project_root() -> Path:
    """The folder holding run.sh (a source checkout), else the current directory."""
    if home := os.environ.get("TPURANK_HOME"):
        return Path(home).resolve()
    here = Path(__file__).resolve().parents[2]
    if (here / "run.sh").exists() and (here / "src" / "tpurank").exists():
        return here
    return Path.cwd().resolve()


def resolve_data_root(data_dir: str | Path | None = None) -> Path:
    """The data root: `--data-dir`, then $TPURANK_DATA, then Kaggle's input folder, then data/."""
    if data_dir:
        return Path(data_dir).expanduser().resolve()
    if env := os.environ.get("TPURANK_DATA"):
        return Path(env).expanduser().resolve()
    if KAGGLE_INPUT.exists():
        return KAGGLE_INPUT
    return project_root() / "data"


@dataclass(frozen=True)
class Paths:
    """The resolved folders of one run. Stage modules take what they need from here.

    Args:
        data: the data root (holds npz_all/npz and sample_submission.csv).
        out: the root of generated outputs (models/, predictions/, submissions/, reports/).
        work: the root of intermediates (features/: the prepared cache and feature tables);
            None = `out`.
    """

    data: Path
    out: Path
    work: Path | None = None

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
        return cls(
            data=resolve_data_root(data_dir),
            out=out,
            work=Path(work).expanduser().resolve() if work else None,
        )

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
        return self.models / model / collection.replace(":", "-")

    def prediction_file(self, model: str, split: str) -> Path:
        return self.predictions / model / f"{split}.npz"
