"""Shared plumbing every stage stands on: paths, config, errors, atomic writes, locks, provenance,
progress, worker processes, memory, the metric and the collection names."""
