"""Training a GNN ranker: the loop (`loop.py`: `fit`; the training it builds and resumes in `training.py`),
one optimisation step with its Graph Segment Training branch (`step.py`, `gst_step.py`), the
ranking losses, the step and time budget, the learning-rate schedule, checkpoints and their
up-to-date key, what a run logs (`run_log.py`), and `trainer.py`, which trains one collection."""
