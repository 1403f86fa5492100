"""Read a YAML (or TOML) file and remember the line of every key, so errors can point at it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from bundle import memo
from bundle.errors import ConfigError

KeyPath = tuple  # ("pd", "prefill", "gpus", 0)
DEFAULTS_NAME = "<embedded defaults>"


@dataclass
class Source:
    """A parsed document (YAML or TOML) plus the 1-based line of each key path in it."""

    name: str  # what messages call the file (its path, or "<embedded defaults>")
    data: dict
    lines: dict[KeyPath, int] = field(default_factory=dict)

    @property
    def is_file(self) -> bool:
        """A user's file (not the embedded defaults)."""
        return self.name != DEFAULTS_NAME

    def line_of(self, path: KeyPath) -> int | None:
        """Line of `path`, or of its nearest ancestor present in the file."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def where(self, path: KeyPath) -> str:
        line = self.line_of(path)
        return f"{self.name}:{line}" if line else self.name


def safe_loader():
    """libyaml's parser when PyYAML was built with it (PyPI's wheels are): the pure-Python one takes a
    tenth of a second for the defaults and a compose file, most of a quick `bundle validate`. PyYAML is
    imported here, not at the top: a remembered parse (bundle/memo.py) needs none of it."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def format_path(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_yaml(text: str, name: str) -> Source:
    """Parse `text`; a syntax error becomes a ConfigError with the line and column. The same text
    parsed before (in any process) is read back from bundle/memo.py's cache."""
    parsed = memo.parsed("yaml-source", text, lambda: _parse_yaml(text, name))
    return Source(name=name, data=parsed["data"], lines={tuple(path): line for path, line in parsed["lines"]})


def _parse_yaml(text: str, name: str) -> dict:
    import yaml

    try:
        # One parse: the node tree gives the lines, and the same tree is constructed into the data.
        loader = safe_loader()(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError([f"{where}: YAML syntax error: {problem}; fix the YAML at that line"],
                          source=name) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([f"{name}:1: the top level must be a mapping of keys (project:, model:, ...), "
                           f"not a {type(data).__name__}"], source=name)
    lines: dict[KeyPath, int] = {}
    _collect_lines(node, (), lines, yaml)
    return {"data": data, "lines": [[list(path), line] for path, line in lines.items()]}


def read_yaml(path: Path) -> Source:
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not a YAML text file (byte {exc.start} is not UTF-8); point -c at "
                           f"your bundle.yaml"], source=str(path)) from None
    except IsADirectoryError:
        raise ConfigError([f"{path}: is a folder; point -c at a bundle.yaml file"], source=str(path)) from None
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found; create it (see docs/configuration.md) "
                           f"or leave out -c to use the embedded defaults"], source=str(path)) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot be read: {exc.strerror}"], source=str(path)) from None
    return parse_yaml(text, str(path))


def _collect_lines(node, path: KeyPath, lines: dict, yaml) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            child = path + (key_node.value,)
            lines[child] = key_node.start_mark.line + 1
            _collect_lines(value_node, child, lines, yaml)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = path + (index,)
            lines[child] = item.start_mark.line + 1
            _collect_lines(item, child, lines, yaml)


_TOML_TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\s*(#.*)?$")
_TOML_KEY = re.compile(r"^\s*(\"[^\"]+\"|[A-Za-z0-9_\-]+)\s*=")


def parse_toml(text: str, name: str) -> Source:
    """Parse TOML (tomllib); the lines of table headers and `key =` lines are found by a line scan,
    only for messages (tomllib keeps no positions). A syntax error is a ConfigError. The same text
    parsed before (in any process) is read back from bundle/memo.py's cache."""
    parsed = memo.parsed("toml-source", text, lambda: _parse_toml(text, name))
    return Source(name=name, data=parsed["data"], lines={tuple(path): line for path, line in parsed["lines"]})


def _parse_toml(text: str, name: str) -> dict:
    import tomllib  # imported here: a remembered parse needs none of it

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"{name}: not valid TOML: {exc}"], source=name) from None
    lines: dict[KeyPath, int] = {}
    table: KeyPath = ()
    for number, line in enumerate(text.splitlines(), 1):
        if m := _TOML_TABLE.match(line):
            table = tuple(part.strip().strip('"') for part in m.group(1).split("."))
            lines[table] = number
        elif m := _TOML_KEY.match(line):
            lines[table + (m.group(1).strip('"'),)] = number
    return {"data": data, "lines": [[list(path), line] for path, line in lines.items()]}
