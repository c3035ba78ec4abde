"""Rankers side by side: the model registry, the baselines, the ensemble, and the train and predict stages."""
