"""The predict stage: `cli.py` its face (options, declaration, run), `stage.py` the work (a model's
predictions of a split, per collection, and its submission CSV)."""
