"""tpurank: learn to rank XLA compiler configurations by runtime (TpuGraphs / Kaggle)."""

__version__ = "0.1.0"
