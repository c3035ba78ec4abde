"""Rankers side by side: the model registry, the untrained rankers, the ensemble, and the train and predict stages."""
