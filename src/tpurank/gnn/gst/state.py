"""What Graph Segment Training keeps across the steps of one training run: each graph's segments
(cut once, on first use) and the table of stale segment embeddings, with the keys a step reads and
writes in it."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tpurank.gnn.data import Batch, GraphData
from tpurank.gnn.gst.embedding_table import EmbeddingTable, segment_keys
from tpurank.gnn.gst.segments import Segment, split_graph
from tpurank.gnn.recipe import Recipe


class SegmentKeys(NamedTuple):
    """Table keys of one graph's segments under one step's configs.

    Args:
        own: (C, S) each segment's key under each config (its own part of the config).
        mean: (S,) each segment's mean entry (over the configs of its last training).
    """

    own: np.ndarray
    mean: np.ndarray


class GstState:
    """What GST keeps across steps: each graph's segments and the table of stale segment embeddings.

    Args:
        recipe: gives segment_nodes, segments_per_step, stale_dropout, history_mb.
        hidden: the model's hidden width (entries hold 2 * hidden + 1 values).
    """

    def __init__(self, recipe: Recipe, hidden: int) -> None:
        self.recipe = recipe
        self.table = EmbeddingTable(2 * hidden + 1, recipe.history_mb)
        self._segments: dict[str, list[Segment]] = {}

    def segments(self, g: GraphData) -> list[Segment]:
        """The segments of `g`, cut on first use."""
        seg = self._segments.get(g.id)
        if seg is None:
            seg = self._segments[g.id] = split_graph(g, self.recipe.segment_nodes)
        return seg

    def keys(self, g: GraphData, full: Batch) -> SegmentKeys:
        """The table keys of every segment of `g` under the batch's configs."""
        configs = full.configs.numpy()
        segs = self.segments(g)
        own = np.stack([segment_keys(g.id, (s.start, s.stop), configs[:, s.config_cols]) for s in segs], 1)
        mean = segment_keys(f"{g.id}/mean", (0, 0), np.arange(len(segs))[:, None])
        return SegmentKeys(own, mean)
