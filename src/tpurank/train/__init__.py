"""The train stage: `cli.py` its face (options, declaration, run), `stage.py` the work (each
collection's model trained by its model module), `staging.py` the folder a retrain writes into,
`collection_processes.py` the collections side by side in processes of their own."""
