"""Floor 7: (typed config, topology) -> what compose runs: the env file and files; what every rehearsal adds;
the command-line edits the other targets (bundle/targets/) share."""
