"""tpurank.prepare.store's cache of decoded config chunks."""

from __future__ import annotations

import numpy as np

from tpurank.prepare.store import _ChunkCache


def test_the_chunk_cache_keeps_its_budget_and_empties_between_steps() -> None:
    cache = _ChunkCache(budget=100)
    for i in range(3):
        cache.put(("f", "id", i), np.zeros(40, dtype=np.uint8))
    assert cache.get(("f", "id", 0)) is None and cache.bytes == 80  # least recently used dropped
    cache.clear()  # `all` between steps
    assert cache.bytes == 0 and not cache.items and cache.get(("f", "id", 2)) is None
    cache.put(("f", "id", 4), np.zeros(40, dtype=np.uint8))
    assert cache.bytes == 40
