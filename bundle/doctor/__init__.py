"""`bundle doctor`: host preflight made of small checks (see checks_*.py); `registry.CHECKS` orders them."""
