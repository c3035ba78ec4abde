"""Stage 1: prune, transform node features, deduplicate configs and compact every graph into the cache.

Readers need only `tpurank.prepare.cache` (PreparedGraph, load_prepared, read_index, iter_prepared).
"""

from tpurank.prepare.cache import (
    SUMMARY_OPCODE,
    PreparedGraph,
    iter_prepared,
    load_prepared,
    read_index,
    save_prepared,
)

__all__ = ["SUMMARY_OPCODE", "PreparedGraph", "iter_prepared", "load_prepared", "read_index", "save_prepared"]
