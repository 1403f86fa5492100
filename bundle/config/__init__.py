"""Stage 1: bundle.yaml (or the embedded defaults) -> one schema-valid, typed Deployment."""
