"""Tabular feature tables for the LightGBM rankers (the `features` stage)."""
