"""Reads the built reference pages as a person does (the HTML, through a real HTML parser, not the
markdown) and checks every row against its source: each configuration key against the JSON schema and
defaults.yaml, each CLI argument against the argparse parser. Each check returns the problems it
found, one line each naming the row; the tests assert there are none, and that planted errors give
some. The expectations are worked out here from the sources, not from docsgen."""

from __future__ import annotations

import argparse
import json
import re

from bs4 import BeautifulSoup, Tag

_SWITCHES = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction,
             argparse._AppendConstAction, argparse._CountAction)
_KINDS = {int: "integer", float: "number"}


def text(node: Tag | None) -> str:
    """What a reader sees in an element, whitespace folded (<wbr> adds nothing)."""
    return " ".join(node.get_text().split()) if node is not None else ""


def _resolve(node: dict, schema: dict) -> dict:
    while "$ref" in node:
        target = schema
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


_NONE = object()


def schema_keys(schema: dict, defaults: dict) -> list[tuple[str, dict, object]]:
    """(dotted key, its schema node, its default or _NONE) for every key a bundle.yaml may set; a map
    of named entries (additionalProperties with properties) under `<name>`."""
    out = []

    def walk(node: dict, prefix: str, default) -> None:
        for name, child in (_resolve(node, schema).get("properties") or {}).items():
            child = _resolve(child, schema)
            value = default.get(name, _NONE) if isinstance(default, dict) else _NONE
            out.append((prefix + name, child, value))
            walk(child, f"{prefix}{name}.", value)
            extra = child.get("additionalProperties")
            if isinstance(extra, dict) and _resolve(extra, schema).get("properties"):
                walk(extra, f"{prefix}{name}.<name>.", _NONE)

    walk(schema, "", defaults)
    return out


def _entries(soup: BeautifulSoup) -> dict[str, list[Tag]]:
    """Each key's entry in the configuration reference: its heading (the key; its anchor the key too),
    then what it takes, its default and its description, as [heading, type, default, description]
    (fewer when the entry lacks one)."""
    out = {}
    for heading in soup.select("article .config-key"):
        for link in heading.select(".headerlink"):
            link.extract()
        facts = heading.find_next_sibling()
        description = facts.find_next_sibling() if facts is not None else None
        cells = [heading]
        if facts is not None and "key-facts" in (facts.get("class") or []):
            cells += [facts.select_one(".key-type"), facts.select_one(".key-default")]
        if description is not None and "key-description" in (description.get("class") or []):
            cells.append(description)
        out[text(heading)] = [c for c in cells if c is not None]
        if heading.get("id") != text(heading).replace("<", "").replace(">", ""):
            out[text(heading)].append(heading)  # an anchor that is not the key: counted as a broken entry
    return out


def config_problems(page_html: str, schema: dict, defaults: dict) -> list[str]:
    """Every schema key's entry in the built configuration reference: its heading (anchored at the key),
    the allowed values (all of them, nothing else), the default, the description."""
    rows = _entries(BeautifulSoup(page_html, "html.parser"))
    problems = []
    keys = schema_keys(schema, defaults)
    for path, node, default in keys:
        cells = rows.get(path)
        if cells is None:
            problems.append(f"{path}: no entry")
            continue
        if len(cells) != 4:
            problems.append(f"{path}: {len(cells)} parts, not 4 (key anchored at itself, type, default, "
                            f"description): {[text(c) for c in cells]}")
            continue
        _, type_cell, default_cell, description_cell = cells
        shown = [text(c) for c in type_cell.find_all("code")]
        if "enum" in node:
            wanted = [json.dumps(v) for v in node["enum"]]
            if shown != wanted:
                problems.append(f"{path}: allowed values shown {shown}, the schema's are {wanted}")
        elif "const" in node:
            if shown != [json.dumps(node["const"])]:
                problems.append(f"{path}: value shown {shown}, the schema's const is {node['const']!r}")
        else:
            kinds = node.get("type")
            for kind in (kinds if isinstance(kinds, list) else [kinds] if kinds else []):
                if kind not in text(type_cell):
                    problems.append(f"{path}: type {kind!r} missing from {text(type_cell)!r}")
        wanted_default = "" if node.get("properties") or default is _NONE else json.dumps(default)
        if text(default_cell) != wanted_default:
            problems.append(f"{path}: default shown {text(default_cell)!r}, defaults.yaml has {wanted_default!r}")
        wanted_description = " ".join(node.get("description", "").replace("`", "").split())
        if text(description_cell) != wanted_description:
            problems.append(f"{path}: description shown {text(description_cell)!r}, the schema's is "
                            f"{wanted_description!r}")
    extra = set(rows) - {path for path, _, _ in keys}
    problems += [f"{path}: an entry for a key the schema does not have" for path in sorted(extra)]
    return problems


def parsers(parser: argparse.ArgumentParser, name: str = "bundle") -> dict[str, argparse.ArgumentParser]:
    """Every verb's parser, sub-verbs included, by its command ("bundle model pin")."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                out[f"{name} {sub_name}"] = sub
                out.update(parsers(sub, f"{name} {sub_name}"))
    return out


def _words(value: str) -> list[str]:
    return re.findall(r"[\w$<>][\w$<>.=/'-]*\w|\w", value)


def _help(action: argparse.Action) -> str:
    """The help as a reader sees it (backticked spans are shown as code, without the backticks)."""
    return " ".join(((action.help or "") % {"default": action.default, "prog": "bundle"}).replace("`", "").split())


def _has_default(action: argparse.Action) -> bool:
    return not (action.default in (None, False, argparse.SUPPRESS) or action.default == []
                or isinstance(action, _SWITCHES))


def cli_problems(page_html: str, parser: argparse.ArgumentParser) -> list[str]:
    """Every argument's row under its verb's heading in the built CLI reference (`bundle` itself first:
    --version, --debug): four cells, its
    names, what it takes (its choices, once), its default, what it does (the help, nothing lost)."""
    soup = BeautifulSoup(page_html, "html.parser")
    problems = []
    for command, sub in {"bundle": parser, **parsers(parser)}.items():
        heading = soup.find(id=command.replace(" ", "-"))
        actions = [a for a in sub._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
                   and a.help != argparse.SUPPRESS]
        if heading is None:
            problems.append(f"{command}: no section")
            continue
        table = heading.find_next(["table", "h2", "h3", "h4"])
        rows = [r.find_all("td") for r in table.select("tbody tr")] if table is not None and table.name == "table" else []
        if len(rows) != len(actions):
            problems.append(f"{command}: {len(rows)} rows for {len(actions)} arguments")
        for action, cells in zip(actions, rows):
            problems += [f"{command} {p}" for p in _argument_problems(action, cells)]
    return problems


def _argument_problems(action: argparse.Action, cells: list[Tag]) -> list[str]:
    label = action.option_strings[-1] if action.option_strings else action.dest
    if len(cells) != 4:
        return [f"{label}: {len(cells)} cells, not 4 (argument, takes, default, what it does): "
                f"{[text(c) for c in cells]}"]
    name_cell, takes_cell, default_cell, what_cell = map(text, cells)
    problems = []
    names = ", ".join(action.option_strings) or action.metavar or action.dest
    if not name_cell.startswith(names):
        problems.append(f"{label}: argument shown {name_cell!r}, the parser's is {names!r}")
    if isinstance(action, _SWITCHES):
        if "switch" not in takes_cell:
            problems.append(f"{label}: a switch, shown as taking {takes_cell!r}")
    elif action.choices:
        shown = [text(c) for c in cells[1].find_all("code")]
        if shown != [str(c) for c in action.choices]:
            problems.append(f"{label}: choices shown {shown}, the parser's are {list(action.choices)}")
    elif action.type in _KINDS and _KINDS[action.type] not in takes_cell:
        problems.append(f"{label}: takes {takes_cell!r}, the parser reads {_KINDS[action.type]}")
    help_text = _help(action)
    if _has_default(action):
        value = " ".join(map(str, action.default)) if isinstance(action.default, (list, tuple)) else str(action.default)
        if not default_cell.startswith(value):
            problems.append(f"{label}: default shown {default_cell!r}, the parser's is {value!r}")
    elif re.search(r"\(default:?\s+\w|;\s*default:?\s+\w", help_text) and not default_cell:
        problems.append(f"{label}: the help names a default, the default column is empty")
    elif default_cell and default_cell not in help_text:
        problems.append(f"{label}: default shown {default_cell!r}, found neither in the parser nor in its help")
    # What it does: the help's words, none lost (each is in one of the row's cells) and none invented.
    help_words = _words(help_text)
    shown_words = set(_words(" ".join([what_cell, default_cell, takes_cell]))) | {"default", "one", "of"}
    lost = [w for w in help_words if w not in shown_words]
    invented = [w for w in _words(what_cell) if w not in help_words]
    if lost or invented:
        problems.append(f"{label}: what it does shown {what_cell!r} for the help {help_text!r}"
                        + (f"; lost {lost}" if lost else "") + (f"; not in the help {invented}" if invented else ""))
    return problems
