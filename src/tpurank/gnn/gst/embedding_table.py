"""The table of stale segment embeddings of Graph Segment Training: the sums a segment gave when it
was last trained, read back while other segments of its graph train (`gnn/training/segment_step.py`).

Keys: one per (graph, segment, the segment's own part of a config). A layout config changes a
segment's embedding only through the configurable nodes inside it (edges between segments are cut),
so two configs that agree there share one entry: a segment without configurable nodes has a single
entry for all of a graph's configs. (The official GST code keys by graph, config and segment, one
scalar per key, over every config of the collection: 500M slots.) The key is a 64-bit BLAKE2b hash
of the graph ID, the segment's bounds and those config values.

Values are float32: a segment's sums are large (hundreds of nodes) while configs differ in them by
little: float16 (an 11-bit mantissa) would round much of that difference away. Memory is bounded:
at most `budget_mb` of values plus the index, in a ring of slots where a new key takes the oldest
written slot (first in, first out). An evicted or never-written key is
simply missing, and a missing embedding is left out as stale embedding dropout leaves one out.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import numpy as np
import torch

ENTRY_OVERHEAD = 160  # bytes of index per entry besides its values: dict slot, key and slot ints


class Lookup(NamedTuple):
    """What `EmbeddingTable.get` finds: values (..., dim) float32, zero where missing; found (...) bool."""

    values: torch.Tensor
    found: np.ndarray


class EmbeddingTable:
    """Stale segment embeddings, float32, at most `budget_mb` MiB (see the module docstring).

    Args:
        dim: values per entry.
        budget_mb: memory bound in MiB (values and index together).
    """

    def __init__(self, dim: int, budget_mb: float) -> None:
        self.dim = dim
        self.capacity = max(1, int(budget_mb * 2**20) // (4 * dim + ENTRY_OVERHEAD))
        # torch.empty touches no page: resident memory grows with the slots written, up to the bound
        self.values = torch.empty((self.capacity, dim), dtype=torch.float32)
        self.slot_key = np.zeros(self.capacity, dtype=np.int64)
        self.slot_of: dict[int, int] = {}
        self.next = 0
        self.lookups = 0
        self.hits = 0
        self.writes = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self.slot_of)

    @property
    def nbytes(self) -> int:
        """The most bytes the table can hold (its bound)."""
        return self.capacity * (4 * self.dim + ENTRY_OVERHEAD)

    def get(self, keys: np.ndarray) -> Lookup:
        """The entries of int64 keys of any shape (zero where missing)."""
        flat = keys.reshape(-1)
        slots = np.array([self.slot_of.get(int(k), -1) for k in flat], dtype=np.int64)
        found = slots >= 0
        out = torch.zeros((len(flat), self.dim), dtype=torch.float32)
        if found.any():
            out[torch.from_numpy(found)] = self.values[torch.from_numpy(slots[found])]
        self.lookups += len(flat)
        self.hits += int(found.sum())
        return Lookup(out.reshape(*keys.shape, self.dim), found.reshape(keys.shape))

    def put(self, keys: np.ndarray, values: torch.Tensor) -> None:
        """Store `values` (..., dim) under `keys` (...); a key seen twice in one call keeps the last."""
        flat = keys.reshape(-1)
        vals = values.detach().reshape(len(flat), self.dim).to("cpu", torch.float32)
        slots = np.empty(len(flat), dtype=np.int64)
        for i, k in enumerate(flat.tolist()):
            slot = self.slot_of.get(k)
            if slot is None:
                slot = self.next
                self.next = (self.next + 1) % self.capacity
                old = int(self.slot_key[slot])
                if self.slot_of.get(old) == slot:
                    del self.slot_of[old]
                    self.evicted += 1
                self.slot_of[k] = slot
                self.slot_key[slot] = k
            slots[i] = slot
        self.values[torch.from_numpy(slots)] = vals
        self.writes += len(flat)

    def stats(self) -> dict[str, float]:
        """Entries, lookups, hit rate, writes and evictions so far."""
        return {
            "entries": len(self),
            "capacity": self.capacity,
            "lookups": self.lookups,
            "hit_rate": round(self.hits / self.lookups, 4) if self.lookups else 0.0,
            "writes": self.writes,
            "evicted": self.evicted,
        }


def segment_keys(graph_id: str, bounds: tuple[int, int], configs: np.ndarray) -> np.ndarray:
    """(C,) int64 keys of one segment under C configs restricted to its configurable nodes.

    Args:
        graph_id: the graph's ID.
        bounds: the segment's (start, stop).
        configs: (C, k_s, 18) the configs' values at the segment's configurable nodes.
    """
    prefix = f"{graph_id}/{bounds[0]}:{bounds[1]}/".encode()
    rows = np.ascontiguousarray(configs.reshape(len(configs), -1))
    out = np.empty(len(rows), dtype=np.int64)
    for i, row in enumerate(rows):
        h = hashlib.blake2b(prefix, digest_size=8)
        h.update(row.tobytes())
        out[i] = int.from_bytes(h.digest(), "little", signed=True)
    return out
