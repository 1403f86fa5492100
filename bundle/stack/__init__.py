"""Stage 4: the Docker boundary (python-on-whales), run records, readiness, the front door."""
