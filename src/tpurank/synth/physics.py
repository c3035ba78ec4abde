"""The hidden hardware physics of one synthetic dataset, drawn from its seed.

Why drawn: a cost model with fixed constants (an MXU penalty of exactly 1.3, padding charged
exactly linearly to 128 lanes) is a formula, and a feature that computes the same formula wins on
such data by construction. Here each dataset draws its own physics from ranges (`draw_physics`):
how much padding weighs and whether it costs linearly or in steps, the MXU penalties, a
cache-size threshold, hidden per-opcode and neighbour-layout interactions, per-graph deviations and
the measurement noise. A ranker that only restates one formula is then right on some datasets and
wrong on others; what stays constant across draws is the kind of effect, not its size.

`REFERENCE` is the generator's former fixed physics with every hidden effect off; the unit tests of
single mechanisms use it (`LayoutCostModel(graph)` without physics). The drawn values are recorded
in the dataset's `synth.json` (`Physics.as_dict`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import numpy as np

LANES, SUBLANES = 128, 8
PAD_MODES = ("linear", "granule", "steps")
ROLES = 3  # a tensor's minor dimension: its last (row-major), its second-to-last, another
KINDS = ("conv", "dot", "reshape")


@dataclass(frozen=True)
class Physics:
    """The cost model's constants and hidden effects for one dataset.

    Args:
        seed: the dataset seed it was drawn from (per-graph effects are seeded from it too).
        lane_weight, sublane_weight: exponents on the lane (128) and sublane (8) padding factors.
        pad_mode: "linear" (padded / real size), "granule" (lanes padded to `granule` x 128, a
            coarser DMA unit) or "steps" (the padding factor rounded up to a power of `step`).
        granule: lane tiles per DMA unit in "granule" mode.
        step: the ratio between cost levels in "steps" mode.
        mxu_input_penalty, mxu_kernel_penalty: compute slowdown when the operand's contracted
            dimension is not minor.
        result_transpose: extra passes over a conv/dot output written against the MXU's order.
        compute_pad_exp, chain_pad_exp: how padding scales MXU time and fused elementwise traffic.
        fused_share: share of an elementwise chain's traffic left once it fuses into its consumer.
        overlap: share of the smaller of compute/memory that does not overlap.
        bytes_per_ns: HBM bandwidth for layout-dependent traffic.
        kind_compute: compute-time multiplier of convolutions and dots (per-opcode efficiency).
        role_cost: (3 kinds, 3 roles) multiplier of an op's memory time by its output's minor role.
        neighbour_cost: (3, 3) extra passes over a consumer's input bytes by (producer's output
            role, consumer's output role): a traffic effect of layout combinations of neighbours.
        cache_bytes, cache_cliff: an op whose padded working set exceeds `cache_bytes` has its
            memory time multiplied by `cache_cliff` (a step, not a slope).
        graph_sigma: log-sd of per-graph deviations of bandwidth, compute efficiency and the
            neighbour effect (the same graph, the same deviation).
        affinity_sigma: log-sd of a hidden per-(graph, node, output minor dimension) multiplier.
        program_sigma: repeatable per-program deviation (`noise.program_noise`).
        noise_sigma, noise_df: re-measurement jitter, Student-t with `noise_df` degrees of freedom.
        tile_overhead_ns, vmem_bytes, spill_slope, vpu_flops_per_ns: tile-kernel constants.
        search_probe: share of a default search's children recorded whatever their runtime
            (they make the rare far slower configs of a real default file).
        copy_weight: scale of every copy the layouts force (producer/consumer mismatch, moved
            weights, outputs copied back, merging branches): how well the chip hides them.
    """

    seed: int = -1
    lane_weight: float = 1.0
    sublane_weight: float = 1.0
    pad_mode: str = "linear"
    granule: int = 1
    step: float = 2.0
    mxu_input_penalty: float = 1.3
    mxu_kernel_penalty: float = 1.15
    result_transpose: float = 0.5
    compute_pad_exp: float = 0.35
    chain_pad_exp: float = 0.7
    fused_share: float = 0.3
    overlap: float = 0.2
    bytes_per_ns: float = 800.0
    kind_compute: tuple[float, float] = (1.0, 1.0)
    role_cost: tuple[tuple[float, ...], ...] = ((1.0,) * ROLES,) * len(KINDS)
    neighbour_cost: tuple[tuple[float, ...], ...] = ((0.0,) * ROLES,) * ROLES
    cache_bytes: float = float("inf")
    cache_cliff: float = 1.0
    graph_sigma: float = 0.0
    affinity_sigma: float = 0.0
    program_sigma: float = 0.001
    noise_sigma: float = 2e-5
    noise_df: float = float("inf")
    tile_overhead_ns: float = 120.0
    vmem_bytes: float = float(16 << 20)
    spill_slope: float = 1.0
    vpu_flops_per_ns: float = 4000.0
    search_probe: float = 0.0
    copy_weight: float = 1.0

    def as_dict(self) -> dict:
        """JSON-ready values (infinities as None), for synth.json."""
        out = {}
        for k, v in dataclasses.asdict(self).items():
            if isinstance(v, float) and not np.isfinite(v):
                v = None
            elif isinstance(v, tuple):
                v = [list(r) if isinstance(r, tuple) else r for r in v]
            out[k] = v
        return out

    def pad(self, d: np.ndarray | float, unit: int, lanes: bool) -> np.ndarray:
        """Weighted padding factor (>= 1) of dimension sizes `d` tiled by `unit` elements.

        Args:
            d: sizes (0 stands for no dimension: factor 1).
            unit: the tile edge (128 lanes, or 8/16 sublanes).
            lanes: True for the lane (minor) dimension (the granule applies to lanes only).
        """
        d = np.asarray(d, dtype=np.float64)
        u = unit * (self.granule if (lanes and self.pad_mode == "granule") else 1)
        safe = np.maximum(d, 1.0)
        f = np.where(d > 0, np.ceil(safe / u) * u / safe, 1.0)
        if self.pad_mode == "steps":
            f = self.step ** np.ceil(np.log(f) / np.log(self.step) - 1e-9)
        return f ** (self.lane_weight if lanes else self.sublane_weight)


REFERENCE = Physics()


def _r(x: float) -> float:
    """4 significant digits: synth.json then shows exactly the values the cost model used."""
    return float(f"{float(x):.4g}")


def _u(rng: np.random.Generator, lo: float, hi: float) -> float:
    return _r(rng.uniform(lo, hi))


def _logu(rng: np.random.Generator, lo: float, hi: float) -> float:
    return _r(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _table(rng: np.random.Generator, rows: int, lo: float, hi: float) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(_r(x) for x in rng.uniform(lo, hi, ROLES)) for _ in range(rows))


def draw_physics(seed: int) -> Physics:
    """The physics of the dataset of `seed` (a pure function of it).

    Ranges: wide enough that no single formula holds across datasets (an MXU penalty from none to
    1.4x, padding from nearly free to superlinear steps), narrow enough to stay plausible for a
    TPU-like chip. The noise ranges bracket the real sample: duplicate configs differ by a log-sd
    of 2e-6 to 6e-5 (unet3d 2e-6, unet_3d.4x4.bf16 1.1e-5, openai_v0_rnn 5.5e-5).
    """
    rng = np.random.default_rng([int(seed), _word("physics")])
    mode = PAD_MODES[int(rng.integers(len(PAD_MODES)))]
    return Physics(
        seed=int(seed),
        lane_weight=_u(rng, 0.3, 1.2),
        sublane_weight=_u(rng, 0.0, 1.0),
        pad_mode=mode,
        granule=int(rng.choice([2, 4])) if mode == "granule" else 1,
        step=_u(rng, 1.25, 2.0) if mode == "steps" else 2.0,
        mxu_input_penalty=_u(rng, 1.0, 1.4),
        mxu_kernel_penalty=_u(rng, 1.0, 1.25),
        result_transpose=_u(rng, 0.0, 1.0),
        compute_pad_exp=_u(rng, 0.1, 0.6),
        chain_pad_exp=_u(rng, 0.4, 1.0),
        fused_share=_u(rng, 0.1, 0.6),
        overlap=_u(rng, 0.0, 0.5),
        bytes_per_ns=_logu(rng, 500.0, 1200.0),
        kind_compute=(_u(rng, 0.6, 1.6), _u(rng, 0.6, 1.6)),
        role_cost=_table(rng, len(KINDS), 0.7, 1.5),
        neighbour_cost=_table(rng, ROLES, 0.0, 0.6),
        cache_bytes=_logu(rng, 1 << 20, 64 << 20),
        cache_cliff=_u(rng, 1.0, 3.0),
        graph_sigma=_u(rng, 0.0, 0.3),
        affinity_sigma=_u(rng, 0.0, 0.08),
        program_sigma=_logu(rng, 3e-4, 3e-3),
        noise_sigma=_logu(rng, 2e-6, 6e-5),
        noise_df=_u(rng, 3.0, 30.0),
        tile_overhead_ns=_logu(rng, 40.0, 400.0),
        vmem_bytes=_logu(rng, 4 << 20, 64 << 20),
        spill_slope=_u(rng, 0.3, 2.0),
        vpu_flops_per_ns=_logu(rng, 2000.0, 8000.0),
        search_probe=_u(rng, 0.0, 0.01),
        copy_weight=_u(rng, 0.3, 1.0),
    )


def _word(key: str) -> int:
    """A 64-bit number naming a string key (sha256: stable across runs and platforms)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


def graph_rng(physics: Physics, *arrays: np.ndarray) -> np.random.Generator:
    """A generator for one graph's hidden deviations, seeded by the physics and the graph's bytes.

    Seeded from the graph's content, not its file: the default and random collections share their
    graphs, and the same program on the same chip must deviate the same way in both.
    """
    h = hashlib.blake2b(digest_size=8)
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return np.random.default_rng([max(0, physics.seed), int.from_bytes(h.digest(), "little")])
