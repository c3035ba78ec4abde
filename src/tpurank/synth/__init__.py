"""The synthetic TpuGraphs generator: exact real file format, hidden physical TPU cost model.

`generate(out, scale, seed)` writes a whole tree; `write_big_layout_graph(path, ...)` writes one
big layout file with bounded memory (for benchmarks).
"""

from tpurank.synth.layout_file import write_big_layout_graph
from tpurank.synth.stage import generate

__all__ = ["generate", "write_big_layout_graph"]
