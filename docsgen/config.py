"""Every configuration key with its type, default and description, from bundle.yaml's schema (the
descriptions, types, choices) and defaults, as the config loader assembles them: the core's
(bundle.schema.json, defaults.yaml) and each wing's section, shown under its wing."""

from __future__ import annotations

import json

from bundle.config import loader
from docsgen.markdown import code, key, page, prose, table

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


def reference(schema: dict | None = None, defaults: dict | None = None) -> str:
    # The schema and defaults as the config loader assembles them: the core's and each wing's section.
    schema = schema if schema is not None else loader.schema()
    defaults = defaults if defaults is not None else loader.defaults_data()
    sections: dict[str, list[list[str]]] = {}
    for path, node, default in rows(schema, defaults):
        sections.setdefault(path.split(".")[0], []).append(
            # An object's default is its keys' defaults, listed in the rows below it.
            [key(path), _type(node), "" if node.get("properties") else _default(default),
             prose(node.get("description", ""))])
    body = [prose(schema.get("description", "")), "",
            "A `bundle.yaml` (`-c FILE`, `$BUNDLE_CONFIG`, or `./bundle.yaml`) overrides any key: mappings "
            "merge, lists are replaced, unknown keys are refused with a did-you-mean. How to write one: "
            "[Configuration](../configuration.md).", ""]
    for section, section_rows in sections.items():
        wing = schema["properties"][section].get("x-wing")  # a wing's section: say whose, from its package
        body += [f"## `{section}`", "", *([f"Read by {wing} only: its wing brings this section (its package's "
                                          "`config.schema.json` and `defaults.yaml`).", ""] if wing else []),
                 table(["key", "type", "default", "description"], section_rows), ""]
    return page("Configuration: every key", "`bundle/config/bundle.schema.json` and `bundle/config/defaults.yaml`, "
                "with each wing's section (`bundle/targets/sections.py`)", *body)
