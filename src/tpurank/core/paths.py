"""Every path tpurank reads or writes is resolved here, and nowhere else.

The data root comes from `--data-dir`, then `$TPURANK_DATA`, then the Kaggle input folder, then
`data/`; when `data/` holds no dataset, a command a user runs by hand falls back to the synthetic
data `./run.sh all` made there (`synthetic_fallback`), so each stage finds the data `all` used.
Generated outputs live under the project root (or `$TPURANK_HOME`, or `--out-dir`), one
folder per stage. The large intermediates (the prepared cache and the feature tables, `features/`)
can live apart, under `--work-dir` (or `$TPURANK_WORK`): on Kaggle, `/kaggle/temp`, so that only
models, predictions, submissions and reports count against `/kaggle/working`'s 20 GB.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tpurank.core import env
from tpurank.core.atomic import write_text
from tpurank.core.errors import command
from tpurank.core.links import resolve

KAGGLE_INPUT = Path("/kaggle/input/predict-ai-model-runtime")
NPZ_SUBDIR = Path("npz_all/npz")
SAMPLE_SUBMISSION = "sample_submission.csv"
SYNTH_MARKER = "synth.json"  # the plan a synthetic tree was generated from (tpurank.synth.stage)
LAST_DATA_ROOT = ".last-data-root"  # in data/: the synthetic tree `all` used last (remember_data_root)
DEMO_PREFIX = "synthetic-"  # data/synthetic-<scale>/: where `all` and `synth` put synthetic trees
# the end of every "no data here" error: the two ways to point tpurank at another data root
DATA_FIX = "pass --data-dir DIR or set $TPURANK_DATA to use data elsewhere"

STAGING_PREFIX = ".next-"  # a model folder being (re)trained: hidden, beside the finished one


def checkout_root() -> Path | None:
    """The source checkout this package runs from (the folder holding run.sh), None when installed."""
    here = Path(__file__).resolve().parents[3]  # src/tpurank/core/paths.py -> the checkout
    return here if (here / "run.sh").exists() and (here / "src" / "tpurank").exists() else None


def project_root() -> Path:
    """$TPURANK_HOME, else the source checkout, else the current directory."""
    return env.HOME.read() or checkout_root() or Path.cwd().resolve()


def resolve_data_root(data_dir: str | Path | None = None) -> tuple[Path, bool]:
    """(the data root, whether the user named it): `--data-dir`, then $TPURANK_DATA, then Kaggle's
    input folder, then data/."""
    if data_dir:
        return resolve(Path(data_dir).expanduser()), True
    if named := env.DATA.read():
        return named, True
    if KAGGLE_INPUT.exists():
        return KAGGLE_INPUT, False
    return project_root() / "data", False


def default_data_root() -> Path:
    """`data/` under the project root: the data root when nothing names another."""
    return project_root() / "data"


def has_dataset(root: Path) -> bool:
    """The folder holds a dataset tree (npz_all/npz)."""
    return (root / NPZ_SUBDIR).is_dir()


def synthetic_scale(root: Path) -> str | None:
    """The scale a synthetic dataset was generated at (from its synth.json), None for real data."""
    marker = root / SYNTH_MARKER
    if not marker.exists():
        return None
    try:
        return str(json.loads(marker.read_text()).get("scale", "unknown"))
    except (OSError, ValueError, AttributeError):
        return "unknown"


def remember_data_root(root: Path) -> None:
    """Record (atomically) that `all` ran on the synthetic tree `root` of data/, so the commands a
    user runs next by hand find it (`synthetic_fallback`). Trees elsewhere are not recorded: the
    user named them and names them again."""
    default = default_data_root()
    inside = root.resolve().parent == default.resolve() and root.name.startswith(DEMO_PREFIX)
    if inside and synthetic_scale(root) is not None:
        write_text(default / LAST_DATA_ROOT, f"{root.name}\n")


def synthetic_fallback(default: Path) -> tuple[Path, str] | None:
    """(the synthetic tree under `default` to use when `default` holds no dataset, why it was chosen).

    The rule: the tree the last `all` recorded (data/.last-data-root), else data/synthetic-demo (what
    `all` generates), else the data/synthetic-<scale> generated last. Only finished trees count
    (a synth.json is written when a tree is complete); None when there is none.
    """
    record = default / LAST_DATA_ROOT
    try:
        name = record.read_text().strip() if record.is_file() else ""
    except (OSError, UnicodeDecodeError):
        name = ""
    trees = [p for p in sorted(default.glob(f"{DEMO_PREFIX}*")) if has_dataset(p) and synthetic_scale(p)]
    if name and (default / name) in trees:
        return default / name, f"the data the last {command('all')} used"
    if (default / f"{DEMO_PREFIX}demo") in trees:
        return default / f"{DEMO_PREFIX}demo", f"made by {command('all')}"
    if trees:
        newest = max(trees, key=lambda p: (p / SYNTH_MARKER).stat().st_mtime)
        return newest, f"the newest synthetic tree in {default}"
    return None


def _shown(path: Path) -> str:
    """`path` relative to the current folder when it lies below it (as the user would type it)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def preset_file(name: str) -> Path:
    """A config preset of configs/ (`profile-cpu.toml`, `demo.toml`): the checkout's, else the copy an
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
            (`.next-<collection>` beside each), published only when it completes (train/staging.py).
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
        fallback: bool = False,
    ) -> Paths:
        """`--data-dir`, `--out-dir` (else the project root) and `--work-dir` (else $TPURANK_WORK,
        else the out folder).

        `fallback`: when nothing names the data root and data/ holds no dataset, use the synthetic
        tree `all` made there (`synthetic_fallback`), announced in one line on stderr. The CLI asks
        for it once per command, for the stages that read the data root: not for `all`, `download`
        and `synth`, which fill it (they must not write into a synthetic tree by accident).
        """
        out = resolve(out_dir) if out_dir else project_root()
        work = resolve(Path(work_dir).expanduser()) if work_dir else env.WORK.read()
        data, named = resolve_data_root(data_dir)
        if fallback and not named and data == default_data_root() and not has_dataset(data):
            found = synthetic_fallback(data)
            if found is not None:
                data, why = found
                print(
                    f"tpurank: data: {_shown(data)} (synthetic '{synthetic_scale(data)}', {why}; "
                    "--data-dir DIR to use another)",
                    file=sys.stderr,
                )
        return cls(data=data, out=out, work=work, data_named=named)

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

    def submission_file(self, model: str, split: str, suffix: str = ".csv") -> Path:
        """`submissions/<split>_<model>.csv` (its scores beside it: `suffix=".json"`)."""
        return self.submissions / f"{split}_{model}{suffix}"

    def submitted(self, split: str, suffix: str = ".csv") -> dict[str, Path]:
        """Model -> its `submissions/<split>_<model><suffix>` found there, by file name (what
        `submission_file` names, read back)."""
        prefix = f"{split}_"
        found = sorted(self.submissions.glob(f"{prefix}*{suffix}"))
        return {f.name.removeprefix(prefix).removesuffix(suffix): f for f in found}

    @property
    def submission(self) -> Path:
        """`submissions/submission.csv`: the file to upload (a copy of the submitted model's test CSV)."""
        return self.submissions / "submission.csv"

    def prediction_file(self, model: str, split: str) -> Path:
        return self.predictions / model / f"{split}.npz"
