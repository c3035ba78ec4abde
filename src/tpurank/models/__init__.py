"""The models: the registry, the untrained rankers, the ensemble, and the train and predict stages
(the learned rankers themselves live in lgbm/ and gnn/)."""
