"""Read a YAML file and remember the line of every key, so errors can point at it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bundle.errors import ConfigError

KeyPath = tuple  # ("pd", "prefill", "gpus", 0)


@dataclass
class YamlSource:
    """A parsed YAML document plus the 1-based line of each key path in it."""

    name: str  # what messages call the file (its path, or "<embedded defaults>")
    data: dict
    lines: dict[KeyPath, int] = field(default_factory=dict)

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


def format_path(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_yaml(text: str, name: str) -> YamlSource:
    """Parse `text`; a syntax error becomes a ConfigError with the line and column."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
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
    _collect_lines(node, (), lines)
    return YamlSource(name=name, data=data, lines=lines)


def read_yaml(path: Path) -> YamlSource:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found; create it (see README, 'Configuration') "
                           f"or leave out -c to use the embedded defaults"], source=str(path)) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot be read: {exc.strerror}"], source=str(path)) from None
    return parse_yaml(text, str(path))


def _collect_lines(node, path: KeyPath, lines: dict) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            child = path + (key_node.value,)
            lines[child] = key_node.start_mark.line + 1
            _collect_lines(value_node, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = path + (index,)
            lines[child] = item.start_mark.line + 1
            _collect_lines(item, child, lines)
