"""Every verb and every flag, from the CLI's own argparse parser (bundle.cli.build_parser).

Each flag's row says once what it takes (its choices, or the kind of value), its default in the
default column (the parser's own value, else the "(default: ...)" its help text spells out, taken out
of the description), and what it does."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from docsgen.markdown import code, page, prose, table

# "(default: X)" or "(default X)" inside a help text, one level of parentheses allowed inside X;
# or a trailing "; default: X".
_DEFAULT_IN_PARENS = re.compile(r"\s*\(default:?\s+((?:[^()]|\([^()]*\))*)\)")
_DEFAULT_AT_END = re.compile(r";\s*default:?\s+([^;()]+)$")
_SWITCHES = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction,
             argparse._AppendConstAction, argparse._CountAction)
_KINDS = {int: "integer", float: "number", Path: "path"}


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


def _has_default(action: argparse.Action) -> bool:
    """Whether the parser itself gives the argument a value when it is left out (a switch's False or
    an empty list is no value worth a column)."""
    return not (action.default in (None, False, argparse.SUPPRESS) or action.default == []
                or isinstance(action, _SWITCHES))


def _default_text(action: argparse.Action) -> str:
    return (" ".join(map(str, action.default)) if isinstance(action.default, (list, tuple))
            else str(action.default))


def split_help(action: argparse.Action) -> tuple[str, str]:
    """(what it does, the default its help text spells out or ""): the help with its "(default: X)"
    and any literal list of the choices taken out (the row shows both in their own columns)."""
    text = (action.help or "") % {"default": action.default, "prog": "bundle"} if action.help else ""
    spelled = ""
    match = _DEFAULT_IN_PARENS.search(text) or _DEFAULT_AT_END.search(text)
    if match:
        spelled = match.group(1).strip()
        text = text[:match.start()] + text[match.end():]
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        names = [re.escape(str(c)) for c in action.choices]
        for sep in (r"\s*\|\s*", r",\s*"):
            text = re.sub(r"(?::|\bone of:?)?\s*" + sep.join(names) + r"\b", "", text)
    return " ".join(text.split()).strip(" ,;"), spelled


def _default(action: argparse.Action) -> str:
    _, spelled = split_help(action)
    if _has_default(action):
        shown = _default_text(action)
        # "pd, which uses all 8 GPUs": the parser's value, then what the help adds to it.
        rest = spelled.removeprefix(shown).strip(" ,;") if spelled.startswith(shown) else spelled
        return code(shown) + (f" ({prose(rest)})" if rest else "")
    return prose(spelled)


def _values(action: argparse.Action) -> str:
    """What the argument takes: its choices once, or the kind of value; "repeatable" when it may be
    given more than once or takes several values."""
    if isinstance(action, _SWITCHES) or action.nargs == 0:  # nargs 0: --version, a switch of its own kind
        return "none (a switch)"
    if action.choices:
        taken = "one of " + ", ".join(code(c) for c in action.choices)
    else:
        taken = _KINDS.get(action.type, "text")
    # After a semicolon, in words no value could be: "one of `a`, `b`, repeatable" read as a third choice.
    if isinstance(action, argparse._AppendAction):
        taken += "; the flag may be given again for each"
    elif action.nargs in ("+", "*"):
        taken += "; one or more, space-separated" if action.nargs == "+" else "; any number, space-separated"
    if action.option_strings and action.nargs == "?":
        taken += "; or none"
    return taken


def _name(action: argparse.Action) -> str:
    """The argument as typed: each option name kept whole on a line (a browser breaks after a hyphen)."""
    names = ", ".join(f'<span class="flag">{_escaped(o)}</span>' for o in action.option_strings) or \
        _escaped(action.metavar or action.dest)
    if action.option_strings and action.nargs != 0:
        metavar = action.metavar or action.dest.upper()  # the choices have their own column
        metavar = metavar if isinstance(metavar, str) else " ".join(metavar)
        names += " " + _escaped(f"[{metavar}]" if action.nargs == "?" else metavar)
    return f"<code>{names}</code>"


def _escaped(text: str) -> str:
    return code(text).removeprefix("<code>").removesuffix("</code>")


def flag_rows(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments a verb's table lists, in the parser's order."""
    return [a for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and a.help != argparse.SUPPRESS]


def _groups(usage: str) -> list[str]:
    """The usage line's top-level parts ("bundle", "launch", "[--rehearsal [engine|sim]]", ...)."""
    groups, depth, current = [], 0, ""
    for char in " ".join(usage.split()):
        if char in "[({":
            depth += 1
        elif char in "])}":
            depth -= 1
        if char == " " and depth == 0:
            groups.append(current)
            current = ""
        else:
            current += char
    return [*groups, current] if current else groups


def _synopsis(usage: str) -> str:
    """The usage line as text that wraps between its parts, never inside one (a code block would run
    it off a phone's screen in one line; a browser would break "--rehearsal" after its first dash)."""
    parts = " ".join(_part(group) for group in _groups(usage))
    return f'<p class="synopsis"><code>{parts}</code></p>'


# A part longer than this may wrap between its own words: "[--speculative {none,mtp,mtp-light,dspark}]"
# is wider than a phone's column (390 px) kept whole.
LONG_PART = 30


def _part(group: str) -> str:
    if len(group) <= LONG_PART:
        return f'<span class="part">{prose(group)}</span>'
    words = " ".join(f'<span class="word">{prose(word)}</span>' for word in group.split(" "))
    return f'<span class="part long">{words}</span>'


def _usage_and_flags(parser: argparse.ArgumentParser) -> list[str]:
    rows = [[_name(a), _values(a), _default(a), prose(split_help(a)[0])] for a in flag_rows(parser)]
    usage = parser.format_usage().removeprefix("usage: ").strip()
    return [_synopsis(usage), "",
            table(["argument", "takes", "default", "what it does"], rows) if rows else "No arguments.", ""]


def top_section(parser: argparse.ArgumentParser) -> str:
    """`bundle` itself: its synopsis and the flags that come before the verb (--version, --debug)."""
    return "\n".join(["## `bundle`", "", prose(parser.description or ""), "", *_usage_and_flags(parser)])


def verb_section(name: str, parser: argparse.ArgumentParser, level: int = 2, help_: str = "") -> str:
    """A verb's description, usage and flags; a verb with verbs of its own (`model pin`) gets a
    section for each below it."""
    # A verb's section ranks first in the search when the query names the verb (docsgen/search.py).
    lines = [f"{'#' * level} `bundle {name}` {{ .search-first }}", "", prose(parser.description or help_), "",
             *_usage_and_flags(parser)]
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
                "[exit codes](exit-codes.md).", "", overview, "", top_section(parser), "",
                *(verb_section(name, sub) for name, sub in verbs.items()))
