"""The GNN rankers over the prepared cache: the tpurank GNN and the official TpuGraphs baseline.

Rooms, from the ground floor up (each imports only the rooms below it):

- `nets/`: the networks and what they read: `Batch`, layers, tile-aware inputs, feature
  standardisation, `GnnRanker` and the official `EarlyJoinSAGE`.
- `data.py`, `device.py`, `recipe.py`: prepared graphs made into batches; the device, precision and
  process group; how a model family is trained (`Recipe`) and what a family is (`ModelSpec`).
- `gst/`: Graph Segment Training's inference side: segments, their summed readouts, and the table
  of stale segment embeddings.
- `scoring.py`: scoring configs with a model, and the validation metric.
- `training/`: the training loop and everything it uses (step, losses, pacing, schedule, checkpoints,
  run log); `training/collection.py` trains one collection.
- `predict.py`: one collection's predictions from its `model.pt`.
- `seeds.py`: several seeds trained and their predictions averaged.
- `families/`: the two model families, one `ModelSpec` subclass each.
- `entry.py`: the registry's objects (`GNN`, `OFFICIAL`): one shared train and predict.
"""
