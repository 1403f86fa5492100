"""Floor 8: semantic rules over the config and what was rendered, command lines through the pinned parsers."""
