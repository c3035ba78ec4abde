"""The model families: each module declares one `ModelSpec` (its network, config section and
recipe) and nothing else; training, prediction and seed averaging are shared (`gnn/entry.py`)."""
