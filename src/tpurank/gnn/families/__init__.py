"""The model families: each module declares one `ModelSpec` (its network, config section, how
that section builds the network, and its recipe) and nothing else; training, prediction and seed
averaging are shared (`gnn/entry.py`)."""
