"""Edits of a compose command line that every other target makes the same way (bundle/targets/):
replace the router's worker options, set one flag's value. The targets change a line only where their
engine differs from containers on one host; these are the changes they share."""

from __future__ import annotations

# The router's options that name workers; the rest of its line is kept as compose has it.
ROUTER_WORKER_OPTIONS = ("--worker-urls", "--prefill", "--decode")


def router_args(args: list[str], workers: list[str]) -> list[str]:
    """The compose router's arguments with its worker options replaced by `workers` (where the
    first of them stood, so the line reads as compose's does)."""
    out, at, i = [], None, 0
    while i < len(args):
        if args[i] in ROUTER_WORKER_OPTIONS:
            at = len(out) if at is None else at
            i += 1
            while i < len(args) and not args[i].startswith("--"):
                i += 1
            continue
        out.append(args[i])
        i += 1
    at = len(out) if at is None else at
    return out[:at] + list(workers) + out[at:]


def with_value(args: list[str], flag: str, value: str) -> list[str]:
    """`args` with FLAG's value set to `value` (`--flag V` and `--flag=V` alike)."""
    for i, token in enumerate(args):
        if token == flag and i + 1 < len(args):
            args[i + 1] = value
        elif token.startswith(flag + "="):
            args[i] = f"{flag}={value}"
    return args
