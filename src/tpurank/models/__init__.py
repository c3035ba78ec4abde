"""The models: the registry, the untrained rankers, the ensemble, their predictions' files, and how
hard a data root is to rank (`difficulty.py`, for compare-synth); the learned rankers themselves
live in lgbm/ and gnn/, and the stages that train and run them in train/ and predict/."""
