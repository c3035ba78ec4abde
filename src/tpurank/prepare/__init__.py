"""The prepare stage: `cli.py` its face (options, declaration, run), `stage.py` the work: prune,
transform node features, deduplicate configs and compact every graph into the cache.

Readers need only `tpurank.prepare.cache` (PreparedGraph, load_prepared, read_index, iter_prepared).
Nothing is imported here: a module that asks only what a cache was built with (`built_with`, which
every stage's run checks) loads no pandas.
"""
