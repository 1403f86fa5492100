"""Every verb and every flag, from the CLI's own argparse parser (bundle.cli.build_parser)."""

from __future__ import annotations

import argparse

from docsgen.markdown import code, page, prose, table


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its actions here; there is no public accessor
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _sub_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each sub-verb's one-line help (a sub-verb added without a description has only this)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def _default(action: argparse.Action) -> str:
    if action.default in (None, False, argparse.SUPPRESS) or action.option_strings == [] or \
            isinstance(action, (argparse._StoreTrueAction, argparse._HelpAction, argparse._VersionAction)):
        return ""
    return code(action.default if not isinstance(action.default, (list, tuple)) else
                " ".join(map(str, action.default)))


def _name(action: argparse.Action) -> str:
    names = ", ".join(action.option_strings) or (action.metavar or action.dest)
    if action.option_strings and action.nargs != 0:
        metavar = action.metavar or (f"{{{','.join(map(str, action.choices))}}}" if action.choices else
                                     action.dest.upper())
        names += f" {metavar if isinstance(metavar, str) else ' '.join(metavar)}"
    return code(names)


def _help(action: argparse.Action) -> str:
    text = (action.help or "") % {"default": action.default, "prog": "bundle"} if action.help else ""
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        text += f" (one of: {', '.join(map(str, action.choices))})"
    return prose(text.strip())


def verb_section(name: str, parser: argparse.ArgumentParser, level: int = 2, help_: str = "") -> str:
    """A verb's description, usage and flags; a verb with verbs of its own (`model pin`) gets a
    section for each below it."""
    rows = [[_name(a), _default(a), _help(a)] for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and a.help != argparse.SUPPRESS]
    usage = parser.format_usage().removeprefix("usage: ").strip()
    lines = [f"{'#' * level} `bundle {name}`", "", prose(parser.description or help_), "",
             "```text", " ".join(usage.split()), "```", "",
             table(["argument", "default", "what it does"], rows) if rows else "No arguments.", ""]
    helps = _sub_help(parser)
    lines += [verb_section(f"{name} {sub_name}", sub, level + 1, helps.get(sub_name, ""))
              for sub_name, sub in _subparsers(parser).items()]
    return "\n".join(lines)


def reference(parser: argparse.ArgumentParser | None = None) -> str:
    if parser is None:
        from bundle.cli import build_parser

        parser = build_parser()
    verbs = _subparsers(parser)
    overview = table(["verb", "what it does"],
                     [[f"[{code(name)}](#bundle-{name})", prose(sub.description or "")] for name, sub in verbs.items()])
    return page("Command line: every verb and flag", "`bundle.cli.build_parser()` (each verb's module under "
                "`bundle/commands/`)",
                "Every verb takes `--debug` (tracebacks and every docker command). Exit codes: "
                "[exit codes](exit-codes.md).", "", overview, "",
                *(verb_section(name, sub) for name, sub in verbs.items()))
