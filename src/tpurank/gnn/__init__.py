"""GNN rankers over the prepared cache: the tpurank GNN (`model.py`) and the official baseline
(`official.py`).

Both share the batching (`data.py`), the ranking losses (`losses.py`) and the training loop
(`loop.py`: early stopping, checkpoints, CUDA/bf16, DistributedDataParallel; `trainer.py` trains
one collection).
"""
