"""Tile-size configurations: the compiler's default tile, the sizes an autotuner tries, and the
24-number `config_feat` row that records a choice in the real file format."""

from __future__ import annotations

import numpy as np

TILE_CONFIG_DIM = 24


DEFAULT_TILE_BYTES = 512 << 10  # the default heuristic grows tiles up to this many output bytes


def tile_choices(size: int, default: int) -> np.ndarray:
    """Tile sizes the autotuner tries along one dimension: the default scaled by 1/4..4 in powers
    of two, a few odd sizes in that range, and the full size (all within 1..size)."""
    lo, hi = max(1, default // 4), min(size, default * 4)
    pw = {min(size, max(1, default * 2**k)) for k in range(-2, 3)}
    odd = {d for d in (3, 6, 12, 24, 48, 96, 192, 384) if lo <= d <= hi}
    return np.array(sorted(pw | odd | {size}), dtype=np.int64)


def default_tile(shape: tuple[int, ...], itemsize: int = 4) -> np.ndarray:
    """The compiler's heuristic tile: start at (8, 128) on the two minor dims and double the
    second-minor, then the minor one, while the tile stays under DEFAULT_TILE_BYTES. Good, but it
    ignores the kernel's arithmetic and padding, so a search can often beat it."""
    shape = shape or (1,)
    t = np.ones(len(shape), dtype=np.int64)
    t[-1] = min(shape[-1], 128)
    if len(shape) > 1:
        t[-2] = min(shape[-2], 8)
        while t[-2] < shape[-2] and 2 * t[-2] * t[-1] * itemsize <= DEFAULT_TILE_BYTES:
            t[-2] = min(shape[-2], 2 * t[-2])
    while t[-1] < shape[-1] and 2 * np.prod(t) * itemsize <= DEFAULT_TILE_BYTES:
        t[-1] = min(shape[-1], 2 * t[-1])
    return t


def sample_tiles(
    shape: tuple[int, ...], rng: np.random.Generator, count: int, itemsize: int = 4
) -> np.ndarray:
    """(count, rank) distinct-where-possible tile choices; row 0 is the default tile."""
    shape = shape or (1,)
    d = default_tile(shape, itemsize)
    choices = [tile_choices(int(s), int(di)) for s, di in zip(shape, d, strict=True)]
    rows = np.stack([c[rng.integers(len(c), size=count * 2)] for c in choices], axis=1)
    rows = np.unique(rows, axis=0)
    rows = rows[rng.permutation(len(rows))]
    rows = rows[~(rows == d).all(axis=1)][: count - 1]
    out = np.concatenate([d[None, :], rows])
    if len(out) < count:  # tiny shapes have few distinct tiles: repeat some (re-measured)
        out = np.concatenate([out, out[rng.integers(len(out), size=count - len(out))]])
    return out


def tile_config_feat(tiles: np.ndarray) -> np.ndarray:
    """(c, 24) config_feat: kernel bounds (unused: 0), output bounds (the tile), input bounds (0).

    Output bounds are right-aligned in 6 slots (leading 1s for missing dims, as in the real files),
    followed by their sum and product.
    """
    c, rank = tiles.shape
    feat = np.zeros((c, TILE_CONFIG_DIM), dtype=np.float32)
    rank = min(rank, 6)
    block = np.zeros((c, 6), dtype=np.float32)
    lead = max(0, 4 - rank)
    block[:, :lead] = 1.0
    block[:, lead : lead + rank] = tiles[:, -rank:]
    feat[:, 8:14] = block
    feat[:, 14] = block.sum(axis=1)
    feat[:, 15] = np.prod(np.where(block > 0, block, 1.0), axis=1)
    return feat
