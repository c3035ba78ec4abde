"""Measurement: modelled cost -> the integer nanoseconds written into a file.

Each runtime is the modelled cost times `exp(program_sigma * z + jitter)`. `z` (`program_noise`) is
a repeatable deviation per compiled program (hashed from the cost: equal costs, equal deviation),
standing for what the model leaves out; it cannot be learned from the configs. The jitter is what
re-measuring adds: Student-t with the dataset's degrees of freedom (the real sample's duplicate
configs mostly agree to ~1e-5 with rare wider pairs), scaled to the dataset's `noise_sigma`. Both
scales are drawn per dataset (`physics.draw_physics`). Runtimes are integer ns, so close runtimes
tie as in the real files.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from tpurank.synth.physics import REFERENCE, Physics


def program_noise(cost: np.ndarray) -> np.ndarray:
    """A standard normal per noise-free cost, the same wherever the cost is the same.

    Configs that compile to the same program (equal modelled cost) share it, so it is no
    measurement noise that averaging re-runs would remove: it stands for everything the model
    leaves out, is repeatable, and cannot be learned from the configs. Hashed from the cost's
    bits (splitmix64), not drawn from a generator, so streamed files get it chunk by chunk.
    """
    # quantised to 1e-8 relative: equal programs whose sums were added in another order agree
    bits = np.rint(np.log(np.maximum(np.asarray(cost, dtype=np.float64), 1e-300)) * 1e8).astype(np.int64)
    bits = bits.view(np.uint64)
    with np.errstate(over="ignore"):
        z = bits + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = ((z >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)
    return ndtri(u)


def jitter(rng: np.random.Generator, size: tuple[int, ...] | int, physics: Physics) -> np.ndarray:
    """Re-measurement jitter in log space: sd `noise_sigma`, Student-t tails of `noise_df`."""
    df = physics.noise_df
    if not np.isfinite(df):
        return rng.normal(0.0, physics.noise_sigma, size=size)
    return rng.standard_t(df, size=size) * (physics.noise_sigma / np.sqrt(df / (df - 2.0)))


def measure(
    cost: np.ndarray,
    rng: np.random.Generator,
    program_sigma: float | None = None,
    physics: Physics | None = None,
) -> np.ndarray:
    """Noisy int64 measurements (ns) of noise-free costs.

    Args:
        cost: modelled runtimes (ns).
        rng: the file's random source (jitter).
        program_sigma: scale of the repeatable per-program deviation (default: the physics').
        physics: the dataset's physics (default: `REFERENCE`, sigma 0.1%, Gaussian jitter 2e-5).
    """
    ph = physics or REFERENCE
    sigma = ph.program_sigma if program_sigma is None else program_sigma
    cost = np.asarray(cost, dtype=np.float64)
    log_dev = sigma * program_noise(cost) + jitter(rng, cost.shape, ph)
    return np.maximum(1, np.rint(cost * np.exp(log_dev))).astype(np.int64)
