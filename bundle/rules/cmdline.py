"""Reading command lines the way argparse would."""

from __future__ import annotations


def option_value(args, flag: str) -> str | None:
    """The value of `--flag V` or `--flag=V` in args; the last one wins, as with argparse."""
    value = None
    args = list(args)
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value
