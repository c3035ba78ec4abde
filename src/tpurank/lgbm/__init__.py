"""LightGBM LambdaRank rankers on the tabular features (`--model lgbm`)."""
