"""Stage 2: (typed config, topology) -> what a target runs: the compose env file and files."""
