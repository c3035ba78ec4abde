"""Kaggle: the code and models datasets for the notebooks, and inference from a models dataset."""
