"""JSON Schema validation with messages a person can act on: every error collected, each naming the
file, the line, the key path, what is wrong and what is allowed ("did you mean" for unknown keys).

Used for bundle.yaml (bundle/config/bundle.schema.json) and docker/lock.toml
(bundle/lock.schema.json). A property may carry "x-invalid": the words that follow its value
when a pattern or enum refuses it ("is not an exact version ...").
"""

from __future__ import annotations

import json

from bundle import memo
from bundle.config.source import Source, format_path
from bundle.errors import did_you_mean


def problems(data: dict, schema: dict, source: Source, *, fix: str | None = None) -> list[str]:
    """Every violation of `schema` in `data`, sorted by line; `fix` is appended to each line.
    A document that passed this schema before is not checked again (bundle/memo.py says why)."""
    digest = memo.key("schema", schema, data)
    if memo.passed(digest):
        return []
    import jsonschema  # a fifth of a second to import: only paid for a document not seen passing

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (source.line_of(e.absolute_path) or 0,
                                                                list(map(str, e.absolute_path))))
    out = []
    for error in errors:
        out.extend(_describe(error, source))
    if not out:
        memo.remember(digest)
    return [f"{line}; fix: {fix}" for line in out] if fix else out


def _describe(error, source: Source) -> list[str]:
    path = tuple(error.absolute_path)
    kind = error.validator
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        out = []
        for key in sorted(set(error.instance) - set(allowed)):
            guess = did_you_mean(key, allowed)
            hint = f"{guess} " if guess else ""
            where = source.where(path + (key,))
            text = error.schema.get("x-unknown", "unknown key")
            out.append(f"{where}: {format_path(path + (key,))}: {text}; {hint}allowed here: {', '.join(allowed)}")
        return out
    if kind == "required":
        out = []
        for key in error.validator_value:
            if key not in error.instance:
                described = (error.schema.get("properties", {}).get(key) or {}).get("description", "")
                out.append(f"{source.where(path)}: {format_path(path + (key,))}: missing"
                           + (f"; expected {described}" if described else ""))
        return out
    where = source.where(path)
    name = format_path(path)
    invalid = error.schema.get("x-invalid")
    if kind in ("pattern", "enum", "minLength") and invalid:
        return [f"{where}: {name}: {json.dumps(error.instance)} {invalid}"]
    if kind == "enum":
        allowed = ", ".join(json.dumps(v) for v in error.validator_value)
        return [f"{where}: {name}: {json.dumps(error.instance)} is not allowed; use one of {allowed}"]
    if kind == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return [f"{where}: {name}: expected {expected}, got {_type_name(error.instance)} "
                f"{json.dumps(error.instance, default=str)}"]
    if kind == "pattern":
        description = error.schema.get("description", "")
        return [f"{where}: {name}: {json.dumps(error.instance)} has the wrong format. {description}".rstrip()]
    if kind == "propertyNames":
        return [f"{where}: {name}: {error.message}; environment names are letters, digits and _"]
    return [f"{where}: {name}: {error.message}"]


def _type_name(value) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "mapping", type(None): "null"}.get(type(value), type(value).__name__)
