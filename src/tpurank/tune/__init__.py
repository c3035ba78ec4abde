"""Tune, not only rank: trained models as the cost model of an autotuning loop that learns from the
measured runtimes of the program it tunes (`Tuner`; `tpurank tune` replays the loop on a file with
measured runtimes)."""

from tpurank.rank.calibrate import Calibration
from tpurank.tune.tuner import Tuner, Tuning

__all__ = ["Calibration", "Tuner", "Tuning"]
