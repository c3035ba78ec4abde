"""The submission CSV: its format, the checker, the scorer, publishing and the Kaggle submit."""
