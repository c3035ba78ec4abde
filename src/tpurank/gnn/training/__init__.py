"""Training a GNN ranker, in the order a run goes: `collection.py` trains one collection (or finds
its model up to date) and calls `loop.fit`; `loop_state.py` builds the training once (`Training`:
model, optimizer, schedule, device) and resumes it from `last.pt` (`LoopState`); `loop.py` steps,
validates and records; `step.py` is one optimisation step and `segment_step.py` its Graph Segment
Training branch. Beside the loop: `pacing.py` (which graphs a step takes, when to validate, when
time is up), `lr_schedule.py`, `losses.py`, `checkpoints.py` (and their up-to-date key) and
`run_log.py` (what a run tells)."""
