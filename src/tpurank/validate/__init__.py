"""The validate stage: `cli.py` its face (options, declaration, run), `stage.py` the work (the
validation report; its plots, curves and sections are report/'s)."""
