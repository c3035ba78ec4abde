"""Offline validation: the report, its plots, and the synthetic-vs-real comparison."""
