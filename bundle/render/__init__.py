"""Floor 7: (typed config, topology) -> what compose runs: the env file and files; what a run with no GPU adds;
the command-line edits the other targets (bundle/targets/) share."""
