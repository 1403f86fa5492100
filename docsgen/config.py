"""Every configuration key with its type, default and description, from bundle.yaml's schema (the
descriptions, types, choices) and defaults, as the config loader assembles them: the core's
(bundle.schema.json, defaults.yaml) and each wing's section, shown under its wing."""

from __future__ import annotations

import html
import json

from bundle.config import loader
from docsgen.markdown import code, page, prose

_MISSING = object()


def _resolve(node: dict, schema: dict) -> dict:
    """A `$ref` into `$defs`, merged with the keys beside it (a description given at the use site wins)."""
    while "$ref" in node:
        target = schema
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _type(node: dict) -> str:
    if "enum" in node:
        # Commas, not a bare "|": a pipe between cells' code spans would split the table row.
        return "one of " + ", ".join(code(json.dumps(v)) for v in node["enum"])
    if "const" in node:
        return code(json.dumps(node["const"]))
    kinds = node.get("type")
    if kinds is None and ("anyOf" in node or "oneOf" in node):
        return " or ".join(_type(n) for n in node.get("anyOf") or node["oneOf"])
    kinds = kinds if isinstance(kinds, list) else [kinds] if kinds else ["any"]
    if "array" in kinds and isinstance(node.get("items"), dict):
        item = node["items"]
        kinds = [f"array of {item.get('type', 'values')}" if k == "array" else k for k in kinds]
    return prose(" | ".join(map(str, kinds)))


def _default(value) -> str:
    """The whole default as JSON (a long one wraps in its cell rather than being cut short)."""
    return "" if value is _MISSING else code(json.dumps(value))


def rows(schema: dict, defaults: dict) -> list[tuple[str, dict, object]]:
    """(key path, resolved schema node, default) for every key, depth first, in the schema's order."""
    out = []

    def walk(node: dict, prefix: str, default) -> None:
        node = _resolve(node, schema)
        for name, child in (node.get("properties") or {}).items():
            child = _resolve(child, schema)
            value = default.get(name, _MISSING) if isinstance(default, dict) else _MISSING
            path = f"{prefix}{name}"
            out.append((path, child, value))
            if child.get("properties"):
                walk(child, path + ".", value)
            elif isinstance(child.get("additionalProperties"), dict) and \
                    _resolve(child["additionalProperties"], schema).get("properties"):
                walk(child["additionalProperties"], path + ".<name>.", _MISSING)

    walk(schema, "", defaults)
    return out


def key_entry(path: str, node: dict, default) -> str:
    """One key as a heading of its own (its anchor is the key: `#network.front_port`), then what it
    takes, its default and its description. A heading, not a table row: the key reads whole at any
    width (a table's key column wrapped 128 of 177 keys over 2-4 lines), and the site's search, which
    ranks a section by its title, finds the key's own entry first when the query is the key."""
    # An object's default is its keys' defaults, given in the entries below it.
    shown_default = "" if node.get("properties") else _default(default)
    facts = f'<span class="key-type">{_type(node)}</span>'
    facts += f' · default <span class="key-default">{shown_default}</span>' if shown_default else \
        ' <span class="key-default"></span>'
    level = "##" if "." not in path else "###"  # a top-level key heads its section
    anchor = path.replace("<", "").replace(">", "")  # `models.<name>.path`: #models.name.path
    # A key that holds a value ranks first in the search when the query names it (docsgen/search.py); a
    # group of keys (`monitoring`, `kubernetes`) does not: its guide answers that query better.
    first = "" if node.get("properties") else " .search-first"
    # The key whole, a line allowed to end only after one of its dots (never inside a name, at an "_").
    name = "<code>" + html.escape(path, quote=False).replace(".", ".<wbr>") + "</code>"
    return "\n".join([f"{level} {name} {{#{anchor} .config-key{first}}}", "", f'<p class="key-facts">{facts}</p>', "",
                      f'<p class="key-description">{prose(node.get("description", ""))}</p>', ""])


def reference(schema: dict | None = None, defaults: dict | None = None) -> str:
    # The schema and defaults as the config loader assembles them: the core's and each wing's section.
    schema = schema if schema is not None else loader.schema()
    defaults = defaults if defaults is not None else loader.defaults_data()
    entries = []
    for path, node, default in rows(schema, defaults):
        entries.append(key_entry(path, node, default))
        wing = None if "." in path else node.get("x-wing")  # a wing's section: say whose, from its package
        if wing:
            entries.append(f"Read by {wing} only: its wing brings this section (its package's "
                           "`config.schema.json` and `defaults.yaml`).\n")
    body = [prose(schema.get("description", "")), "",
            "A `bundle.yaml` (`-c FILE`, `$BUNDLE_CONFIG`, or `./bundle.yaml`) overrides any key: mappings "
            "merge, lists are replaced, unknown keys are refused with a did-you-mean. How to write one: "
            "[Configuration](../configuration.md). Each key below is its own entry, its link the key "
            "(`configuration.html#network.front_port`).", ""]
    return page("Configuration: every key", "`bundle/config/bundle.schema.json` and `bundle/config/defaults.yaml`, "
                "with each wing's section (`bundle/targets/sections.py`)", *body, *entries)
