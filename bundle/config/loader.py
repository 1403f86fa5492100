"""bundle.yaml -> one validated, typed Deployment (the embedded defaults fill every gap).

Order: parse YAML (syntax errors with line and column) -> JSON Schema (every error collected, each
with its line and key path, "did you mean" for unknown keys) -> merge onto the defaults. Semantic
rules that span keys live in bundle.rules.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from bundle.errors import ConfigError
from bundle.config.source import YamlSource, format_path, parse_yaml, read_yaml

HERE = Path(__file__).resolve().parent
SCHEMA_PATH = HERE / "bundle.schema.json"
DEFAULTS_PATH = HERE / "defaults.yaml"
DEFAULT_CONFIG_NAMES = ("bundle.yaml", "bundle.yml")
TOPOLOGIES = ("tp4", "pd")


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@lru_cache(maxsize=1)
def _defaults_source() -> YamlSource:
    return parse_yaml(DEFAULTS_PATH.read_text(), "<embedded defaults>")


@dataclass(frozen=True)
class Role:
    """One SGLang server: its host GPUs, TP size, extra flags and environment."""

    name: str  # "tp4", "prefill", "decode"
    key_path: tuple  # where it lives in the config, for messages
    gpus: tuple[int, ...]
    tp_size: int
    extra_args: tuple[str, ...]
    env: dict[str, str]


@dataclass(frozen=True)
class Deployment:
    """The merged, schema-valid configuration. `raw` keeps the merged mapping for rarely-used keys."""

    source: YamlSource  # the user's file, or the defaults when there is none
    raw: dict

    @property
    def project(self) -> str:
        return self.raw["project"]

    @property
    def model_path(self) -> str:
        return self.raw["model"]["path"]

    @property
    def served_name(self) -> str:
        return self.raw["model"]["served_name"]

    @property
    def levers(self) -> dict:
        return self.raw["levers"]

    @property
    def network(self) -> dict:
        return self.raw["network"]

    @property
    def api_key_file(self) -> str | None:
        path = self.raw.get("api_key_file")
        if path is None:
            return None
        # Relative paths are relative to the config file, as compose does for its own files.
        base = Path(self.source.name).parent if self.source.name != "<embedded defaults>" else Path.cwd()
        return str((base / path).resolve())

    def project_name(self, topology: str) -> str:
        return f"{self.project}-{topology}"

    def roles(self, topology: str) -> list[Role]:
        if topology == "tp4":
            return [_role("tp4", ("tp4",), self.raw["tp4"])]
        pd = self.raw["pd"]
        return [_role("prefill", ("pd", "prefill"), pd["prefill"]),
                _role("decode", ("pd", "decode"), pd["decode"])]


def _role(name: str, key_path: tuple, data: dict) -> Role:
    return Role(name=name, key_path=key_path, gpus=tuple(data["gpus"]), tp_size=data["tp_size"],
                extra_args=tuple(str(a) for a in data["extra_args"]),
                env={k: _env_value(v) for k, v in data["env"].items()})


def _env_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def find_config(explicit: str | None) -> Path | None:
    """-c FILE, else $BUNDLE_CONFIG, else ./bundle.yaml if present, else None (embedded defaults)."""
    if explicit:
        return Path(explicit)
    if os.environ.get("BUNDLE_CONFIG"):
        return Path(os.environ["BUNDLE_CONFIG"])
    for name in DEFAULT_CONFIG_NAMES:
        if Path(name).is_file():
            return Path(name)
    return None


def load_config(path: str | Path | None) -> Deployment:
    """Load and validate; raises one ConfigError listing every schema problem in the file."""
    if path is None:
        # Nothing from the user to check: the embedded defaults are held to the schema by the
        # test suite, and skipping jsonschema's import keeps `bundle validate` quick.
        source = _defaults_source()
        user = {}
    else:
        source = read_yaml(Path(path))
        user = source.data
        problems = schema_problems(user, source)
        if problems:
            raise ConfigError(problems, source=source.name)
    merged = deep_merge(copy.deepcopy(_defaults_source().data), user)
    return Deployment(source=source, raw=merged)


def deep_merge(base: dict, override: dict) -> dict:
    """Mappings merge key by key; every other value (lists too) replaces the default."""
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def schema_problems(data: dict, source: YamlSource) -> list[str]:
    """Every schema violation in `data`, one line each: 'file:line: key.path: what is wrong; allowed'."""
    import jsonschema  # a fifth of a second to import: only paid when there is a file to check

    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: (source.line_of(e.absolute_path) or 0,
                                                                list(map(str, e.absolute_path))))
    problems = []
    for error in errors:
        problems.extend(_describe(error, source))
    return problems


def _describe(error, source: YamlSource) -> list[str]:
    path = tuple(error.absolute_path)
    kind = error.validator
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        out = []
        for key in sorted(set(error.instance) - set(allowed)):
            guess = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean '{guess[0]}'? " if guess else ""
            where = source.where(path + (key,))
            out.append(f"{where}: {format_path(path + (key,))}: unknown key; {hint}"
                       f"allowed here: {', '.join(allowed)}")
        return out
    where = source.where(path)
    name = format_path(path)
    if kind == "enum":
        allowed = ", ".join(json.dumps(v) for v in error.validator_value)
        return [f"{where}: {name}: {json.dumps(error.instance)} is not allowed; use one of {allowed}"]
    if kind == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return [f"{where}: {name}: expected {expected}, got {_yaml_type(error.instance)} "
                f"{json.dumps(error.instance, default=str)}"]
    if kind == "pattern":
        description = error.schema.get("description", "")
        return [f"{where}: {name}: {json.dumps(error.instance)} has the wrong format. {description}".rstrip()]
    if kind == "propertyNames":
        return [f"{where}: {name}: {error.message}; environment names are letters, digits and _"]
    return [f"{where}: {name}: {error.message}"]


def _yaml_type(value) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "mapping", type(None): "null"}.get(type(value), type(value).__name__)
