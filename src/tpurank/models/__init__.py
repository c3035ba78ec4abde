"""The models: the registry, the untrained rankers, the ensemble, how hard a data root is to rank
(`difficulty.py`, for compare-synth), and the train and predict stages (the learned rankers
themselves live in lgbm/ and gnn/)."""
