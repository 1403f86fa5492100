"""Snapshots of the pinned SGLang's and smg's (the router's) own argument parsers, for fast checks.

Importing sglang's ServerArgs takes seconds (it imports torch) and needs the whole Python stack, so
`bundle validate` cannot call it on every run. Instead `python -m bundle.rules.argspec --write` records
each parser's options (flags, nargs, choices, value type) in bundle/rules/parsers/*.json from the pinned
packages, `parser_from_spec` rebuilds an equivalent argparse parser in milliseconds, and a contract
test (tests/test_contract_parsers.py) proves the snapshot equals the real parser and that every
command line the bundle generates parses under the real one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from functools import lru_cache
from pathlib import Path

from bundle import memo

DATA_DIR = Path(__file__).resolve().parent / "parsers"
SERVER_SPEC = "sglang-server"
ROUTER_SPEC = "smg"
SPECS = {
    # name -> (file, how to get the real parser)
    "sglang-server": DATA_DIR / "sglang-server-args.json",
    "smg": DATA_DIR / "smg-args.json",
}
_SIMPLE_TYPES = {int: "int", float: "float", str: "str"}


class ArgumentsRejected(Exception):
    """The parser refused a command line; the message is argparse's own."""


def _fixed_width_formatter(prog: str) -> argparse.HelpFormatter:
    # argparse makes a formatter for every add_argument; the default one asks the terminal for its
    # size each time, a third of building SGLang's 532 options. These parsers never print help.
    return argparse.HelpFormatter(prog, width=100)


class _RaisingParser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _fixed_width_formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):  # argparse would print usage and exit(2)
        raise ArgumentsRejected(message)


def real_parser(name: str) -> argparse.ArgumentParser:
    """The pinned package's own parser (imports sglang / smg: slow, needs them installed)."""
    parser = _RaisingParser(prog=name, add_help=False)
    if name == "sglang-server":
        from sglang.srt.server_args import ServerArgs

        ServerArgs.add_cli_args(parser)
    elif name == "smg":
        from smg.router_args import RouterArgs

        # What `python -m smg.launch_router` (and `smg launch`) parse with: no --router- prefix.
        RouterArgs.add_cli_args(parser, use_router_prefix=False)
    else:
        raise KeyError(name)
    return parser


def spec_from_parser(parser: argparse.ArgumentParser, *, package_version: str) -> dict:
    options = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        options.append({
            "flags": list(action.option_strings),
            "dest": action.dest,
            "action": _action_kind(action),
            "nargs": action.nargs,
            "choices": _jsonable_choices(action.choices),
            "type": _SIMPLE_TYPES.get(action.type, "str" if action.type is None else "other"),
        })
    options.sort(key=lambda o: o["flags"][0])
    return {"version": package_version, "options": options}


def _action_kind(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "flag"  # store_true/store_false/store_const and their subclasses
    if isinstance(action, argparse._AppendAction):
        return "append"
    return "store"


def _jsonable_choices(choices):
    if choices is None:
        return None
    values = [c if isinstance(c, (str, int, float, bool)) else str(c) for c in choices]
    # Some choices come from sets or hash maps whose order changes from run to run: sort them so
    # the snapshot is deterministic (order carries no meaning for a parser).
    return sorted(values, key=str)


@lru_cache(maxsize=None)
def load_spec(name: str) -> dict:
    return json.loads(SPECS[name].read_text())


def parser_from_spec(spec: dict) -> argparse.ArgumentParser:
    """An argparse parser accepting exactly the options of the snapshot (flags, arity, choices, types)."""
    parser = _RaisingParser(prog="spec", add_help=False, allow_abbrev=False)
    for option in spec["options"]:
        kwargs: dict = {"dest": option["dest"]}
        if option["action"] == "flag":
            kwargs["action"] = "store_true"
        else:
            kwargs["action"] = "append" if option["action"] == "append" else "store"
            if option["nargs"] is not None:
                kwargs["nargs"] = option["nargs"]
            if option["choices"] is not None:
                kwargs["choices"] = option["choices"]
            if option["type"] in ("int", "float"):
                kwargs["type"] = int if option["type"] == "int" else float
        parser.add_argument(*option["flags"], **kwargs)
    return parser


@lru_cache(maxsize=None)
def cached_parser(name: str) -> argparse.ArgumentParser:
    """One parser per snapshot and process (building SGLang's 532 options takes tens of ms)."""
    return parser_from_spec(load_spec(name))


@lru_cache(maxsize=None)
def _spec_digest(name: str) -> str:
    return hashlib.sha256(SPECS[name].read_bytes()).hexdigest()


def check_arguments(name: str, tokens: list[str]) -> str | None:
    """None if the snapshot of parser `name` accepts `tokens`, else argparse's message. A command
    line this snapshot accepted before is not parsed again (bundle/memo.py)."""
    digest = memo.key("argspec", _spec_digest(name), list(tokens))
    if memo.passed(digest):
        return None
    try:
        cached_parser(name).parse_args(tokens)
    except ArgumentsRejected as exc:
        return str(exc)
    memo.remember(digest)
    return None


def option_values(name: str, tokens: list[str], dests) -> dict:
    """The values (defaults included) `tokens` give the snapshot's options whose dest is in `dests`,
    read with a parser of just those options: cheaper than the whole parser when only a few are
    wanted; the rest of the line is passed over (check_arguments is what checks it)."""
    wanted = set(dests)
    spec = load_spec(name)
    parser = _subset_parser(name, frozenset(wanted))
    ns, _rest = parser.parse_known_args(tokens)
    known = {o["dest"] for o in spec["options"]}
    return {d: getattr(ns, d) for d in sorted(wanted) if d in known}


@lru_cache(maxsize=None)
def _subset_parser(name: str, dests: frozenset) -> argparse.ArgumentParser:
    spec = load_spec(name)
    return parser_from_spec({**spec, "options": [o for o in spec["options"] if o["dest"] in dests]})


def aliases(name: str) -> dict[str, tuple[str, ...]]:
    """Each flag -> every spelling of the same option (--tp-size <-> --tensor-parallel-size)."""
    out = {}
    for option in load_spec(name)["options"]:
        for flag in option["flags"]:
            out[flag] = tuple(option["flags"])
    return out


def _installed_version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)


def write_specs() -> None:
    """Regenerate bundle/rules/parsers/*.json from the installed (pinned) sglang and smg."""
    for name, dist in (("sglang-server", "sglang"), ("smg", "smg")):
        spec = spec_from_parser(real_parser(name), package_version=_installed_version(dist))
        SPECS[name].write_text(json.dumps(spec, indent=1) + "\n")
        print(f"wrote {SPECS[name]} ({len(spec['options'])} options, {dist} {spec['version']})")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m bundle.rules.argspec --write")
    write_specs()
