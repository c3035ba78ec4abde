"""The files of a synthetic tree: where each goes and the keys that seed it.

Every file is a pure function of (seed, collection, split, index): each random choice draws from
a generator seeded by the run seed and string keys (`keyed_rng`), so a file's bytes never depend
on which other files a run writes, nor in what order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpurank.core.collections import COLLECTIONS, SPLITS, collection_dir
from tpurank.core.paths import NPZ_SUBDIR
from tpurank.synth.scales import Scale
from tpurank.synth.stems import test_stems, unique_stems


@dataclass(frozen=True)
class FileSpec:
    """One file to generate: where it goes and the index that seeds it."""

    collection: str
    split: str
    stem: str
    index: int

    @property
    def family(self) -> str:
        return "tile" if self.collection == "tile:xla" else self.collection.split(":")[1]

    def path(self, root: Path) -> Path:
        return root / NPZ_SUBDIR / collection_dir(self.collection) / self.split / f"{self.stem}.npz"


def keyed_rng(seed: int, *keys: str | int) -> np.random.Generator:
    """A generator seeded by the run seed and string/int keys (stable across runs and platforms)."""
    return np.random.default_rng([seed, *(_word(k) if isinstance(k, str) else k for k in keys)])


def _word(key: str) -> int:
    """A 64-bit number naming a string key (sha256: stable, no collisions between our keys)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


def plan(scale: Scale, seed: int) -> list[FileSpec]:
    """Every file of the scale, in collection then split order (stems drawn per family and split)."""
    specs: list[FileSpec] = []
    for collection in COLLECTIONS:
        family = "tile" if collection == "tile:xla" else collection.split(":")[1]
        for split in SPLITS:
            n = scale.count(collection, split)
            partner = _partner(collection)
            longest = max(n, scale.count(partner, split)) if partner else n
            rng = keyed_rng(seed, "stems", family, split)
            stems = test_stems(rng, longest) if split == "test" else unique_stems(rng, family, longest)
            specs.extend(FileSpec(collection, split, stems[i], i) for i in range(n))
    return specs


def _partner(collection: str) -> str | None:
    """The collection sharing graphs with this one (xla:default <-> xla:random, ...)."""
    if collection == "tile:xla":
        return None
    kind, family, search = collection.split(":")
    return f"{kind}:{family}:{'random' if search == 'default' else 'default'}"
