"""The features stage: `cli.py` its face (options, declaration, run), `stage.py` the work (the
tabular feature tables for the LightGBM rankers), built from `layout.py`, `tile.py`, `mxu.py` and
`common.py`, read and written by `io.py`."""
