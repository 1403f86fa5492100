"""Floor 4 (tests/test_import_graph.py): bundle.yaml (or the embedded defaults) -> one schema-valid, typed Deployment."""
