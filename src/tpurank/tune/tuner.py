"""`Tuner`: trained models as the cost model of an autotuning loop that learns from each measurement.

    from tpurank.tune import Tuner

    with Tuner.load("out") as tuner:                  # a trained out folder, or a models dataset
        tuning = tuner.start("candidates.pb")        # one program (a tile file: name the kernel)
        for _ in range(5):
            configs = tuning.propose(8)              # the best predicted among those not measured
            tuning.observe(configs, measure(configs))  # runtimes in ns (math.inf: the run failed)
        config, runtime = tuning.best()

The program is ranked once by the same stages as `rank` (tpurank.rank.Ranker); each `observe`
makes the next `propose` calibrate LightGBM on every runtime measured so far (tpurank.rank.calibrate).
Nothing is global: two tunings of one `Tuner` share only the staged models. For a seed
(`Calibration.seed`) the proposals are the same run after run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType

import numpy as np

from tpurank.core.errors import TpurankError
from tpurank.rank.calibrate import Calibration
from tpurank.rank.program import Program
from tpurank.rank.ranker import Ranker
from tpurank.rank.ranking import Ranking


class Tuning:
    """One program being tuned: propose configs, observe their runtimes, propose again.

    Args:
        program: the program, ranked by the trained models.
        how: how LightGBM and the GNN learn from the measurements.
        candidates: the user's config indices it may propose (None: every candidate of the program).
    """

    def __init__(self, program: Program, how: Calibration, candidates: Iterable[int] | None = None) -> None:
        self.program, self.how = program, how
        n = len(program.candidates.file_index)
        self.allowed = np.ones(n, dtype=bool)
        if candidates is not None:
            self.allowed[:] = False
            self.allowed[[self._position(int(c)) for c in candidates]] = True
        self.measured: dict[int, float] = {}  # position -> runtime (ns)
        self.failed: set[int] = set()  # positions whose run failed
        self._ranking: Ranking | None = None

    @property
    def name(self) -> str:
        """The program's graph name (as `rank` prints it)."""
        return self.program.name

    def _position(self, config: int) -> int:
        position = self.program.position(config)
        if position is None:
            raise TpurankError(
                f"{self.program.candidates.source}: config {config} is not a candidate of {self.name}"
            )
        return position

    def ranking(self) -> Ranking:
        """The program's ranking, calibrated on every runtime observed so far (the configs it learned
        from are left out of its scores)."""
        if self._ranking is None:
            self._ranking = self.program.ranking(self.measured, self.how)
        return self._ranking

    def propose(self, n: int, explore: float = 0.0) -> list[int]:
        """The `n` configs (the user's indices) ranked best among those not yet measured; fewer when
        fewer are left, none when every candidate is measured.

        Args:
            n: how many to propose (>= 1).
            explore: the share of the `n` spread over the predicted order of the others not yet
                measured, one drawn at random from each of as many equal slices of it (`spread`;
                seeded: the same draw for the same seed and measurements). The best-ranked configs
                of a layout program sit within a fraction of a percent of each other, so a model
                calibrated on them alone learns noise, and only near them (select.coverage); a few
                from across the order show it the spread.
        """
        if n < 1:
            raise TpurankError(f"propose: n must be >= 1, got {n}")
        if not 0 <= explore <= 1:
            raise TpurankError(f"propose: explore must be in 0..1, got {explore}")
        done = set(self.measured) | self.failed
        position = {int(c): i for i, c in enumerate(self.program.candidates.file_index)}
        left = [
            int(c)
            for c in self.ranking().order
            if self.allowed[position[int(c)]] and position[int(c)] not in done
        ]
        drawn = min(round(n * explore), max(0, len(left) - n))
        best = left[: n - drawn]
        if not drawn:
            return best
        rng = np.random.default_rng([self.how.seed, len(self.measured), len(self.failed)])
        rest = left[n - drawn :]
        return best + [rest[i] for i in spread(len(rest), drawn, rng)]

    def observe(self, configs: Sequence[int], runtimes: Sequence[float]) -> None:
        """Record measured runtimes; the next `propose` learns from them.

        Args:
            configs: the user's config indices measured.
            runtimes: their runtimes in ns (> 0); `math.inf` for a run that failed (never proposed
                again, nothing learned from it).

        Raises:
            TpurankError: lengths that differ, a config that is not a candidate or is observed
                twice, a runtime that is NaN, zero or negative.
        """
        if len(configs) != len(runtimes):
            raise TpurankError(f"observe: {len(configs)} configs but {len(runtimes)} runtimes")
        new: dict[int, float] = {}
        for config, runtime in zip(configs, runtimes, strict=True):
            p, value = self._position(int(config)), float(runtime)
            if p in self.measured or p in self.failed or p in new:
                raise TpurankError(f"observe: config {config} of {self.name} is observed twice")
            if math.isnan(value) or value <= 0:
                raise TpurankError(f"observe: config {config}: runtime {runtime} is not a positive number")
            new[p] = value
        for p, value in new.items():
            if math.isinf(value):
                self.failed.add(p)
            else:
                self.measured[p] = value
        self._ranking = None

    def best(self) -> tuple[int, float] | None:
        """The fastest config measured so far and its runtime (None before any measurement)."""
        if not self.measured:
            return None
        p = min(self.measured, key=lambda q: (self.measured[q], q))
        return int(self.program.candidates.file_index[p]), self.measured[p]

    @property
    def measurements(self) -> dict[int, float]:
        """The user's config index -> runtime of every measured config, in the order observed."""
        file_index = self.program.candidates.file_index
        return {int(file_index[p]): v for p, v in self.measured.items()}


def spread(n: int, k: int, rng: np.random.Generator) -> list[int]:
    """`k` of `n` places in a predicted order, one drawn at random from each of `k` equal slices of
    it (in order): a draw that covers the whole order, as a uniform draw does on average only.

    Args:
        n: the places (>= k).
        k: how many to draw.
        rng: the seeded generator.
    """
    edges = np.linspace(0, n, k + 1).round().astype(np.int64)
    return [int(rng.integers(lo, hi)) for lo, hi in zip(edges[:-1], edges[1:], strict=True) if hi > lo]


class Tuner:
    """Trained models staged once, ready to tune programs.

    Args:
        ranker: the staged models (tpurank.rank.Ranker).
        how: how LightGBM and the GNN learn from measurements (default `Calibration()`).
    """

    def __init__(self, ranker: Ranker, how: Calibration | None = None) -> None:
        self.ranker, self.how = ranker, how or Calibration()

    @classmethod
    def load(
        cls,
        models: str | Path,
        work: str | Path | None = None,
        prepared: str | Path | None = None,
        how: Calibration | None = None,
    ) -> Tuner:
        """The models of a trained out folder or a models dataset (as `Ranker.load`).

        Args:
            models: a trained out folder, or a folder holding a models dataset.
            work: a work folder to keep (default: a temporary one, removed on `close`).
            prepared: the prepared cache training used, when it is not under `models`.
            how: how LightGBM and the GNN learn from measurements; its seed makes the proposals repeatable.
        """
        return cls(Ranker.load(models, work, prepared), how)

    def start(
        self,
        program: str | Path,
        graph: str | None = None,
        kind: str | None = None,
        collection: str | None = None,
        model: str | None = None,
        candidates: Iterable[int] | None = None,
    ) -> Tuning:
        """Rank a program's candidates and start tuning it.

        Args:
            program: a `.pb` or `.npz` file.
            graph: which graph of the file (a tile protobuf holds one per kernel); None: its only one.
            kind: "layout" or "tile" to insist on one.
            collection: whose models rank a layout graph (default as `rank`).
            model: "ensemble" or a member; None: the ensemble where fitted, else the trained member
                with the best valid score (`Ranker.rank_files`).
            candidates: the user's config indices it may propose (default: every candidate).

        Raises:
            TpurankError: a file that cannot be ranked, or a graph it does not hold.
        """
        programs = self.programs(program, kind, collection, model, [graph] if graph else None)
        if len(programs) > 1:
            names = ", ".join(p.name for p in programs[:5])
            raise TpurankError(f"{program}: holds {len(programs)} graphs: name one ({names} ...)")
        return Tuning(programs[0], self.how, candidates)

    def programs(
        self,
        program: str | Path,
        kind: str | None = None,
        collection: str | None = None,
        model: str | None = None,
        graphs: Sequence[str] | None = None,
    ) -> list[Program]:
        """The graphs of a file (`graphs`: only those) ranked in one pass of the stages, each ready
        to be tuned (`Tuning(program, tuner.how)`).

        Raises:
            TpurankError: a graph the file does not hold.
        """
        programs = self.ranker.programs(program, kind, collection, model)
        if graphs is None:
            return programs
        names = [p.name for p in programs]
        missing = [g for g in graphs if g not in names]
        if missing:
            raise TpurankError(f"{program}: no graph {missing[0]!r} (it has {', '.join(names[:5])})")
        return [p for p in programs if p.name in graphs]

    def close(self) -> None:
        """Remove the work folder when it is a temporary one."""
        self.ranker.close()

    def __enter__(self) -> Tuner:
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
