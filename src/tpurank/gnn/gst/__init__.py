"""Graph Segment Training (GST), the part scoring needs too: graphs cut into segments
(`segments.py`), a segment's readout as sums and the head run on summed readouts (`sums.py`),
and what training keeps across steps: the table of stale segment embeddings (`embedding_table.py`)
and each graph's segments (`state.py`). The GST training step itself is a branch of the one
training step (`training/segment_step.py`)."""
