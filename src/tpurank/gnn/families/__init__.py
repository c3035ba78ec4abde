"""The model families: each module declares one `ModelSpec` subclass (its network class and config
section, and the methods by which that section builds the network and the recipe) and its `SPEC`,
and nothing else; training, prediction and seed averaging are shared (`gnn/entry.py`)."""
