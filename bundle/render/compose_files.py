"""The one reader of the project's compose files, for every render that starts from them (compose's
own command lines, every other target's) and for the image audit: YAML as compose reads it (its merge
tags `!reset` and `!override` load as the value they carry; the no-GPU modes' overlays use `!reset`;
anchors and merge keys resolved), a service's mapping in each file, and its `environment:` as
compose resolves it (the last file that sets a name wins), interpolated with the rendered variables."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from bundle import memo
from bundle.config.source import safe_loader
from bundle.render.interpolate import interpolate


@lru_cache(maxsize=None)
def compose_loader():
    """A safe loader that also takes compose's merge tags (made on first use: PyYAML is imported only
    when a file's parse is not remembered, see bundle/memo.py)."""
    import yaml

    class ComposeLoader(safe_loader()):
        pass

    def tagged_value(loader, node):
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    for tag in ("!reset", "!override"):
        ComposeLoader.add_constructor(tag, tagged_value)
    return ComposeLoader


def _load(text: str) -> dict:
    import yaml

    return yaml.load(text, Loader=compose_loader()) or {}  # noqa: S506 - a SafeLoader


def read(path) -> dict:
    """One compose file as compose reads its YAML (a text read before is remembered: bundle/memo.py)."""
    text = Path(path).read_text()
    return memo.parsed("compose-file", text, lambda: _load(text))


def services(path) -> dict[str, dict]:
    """service -> its mapping in one file (a service given no mapping reads as an empty one)."""
    return {name: spec if isinstance(spec, dict) else {} for name, spec in (read(path).get("services") or {}).items()}


def service_specs(files, service: str) -> list[dict]:
    """The service's mapping in each file, in order ({} where a file does not name it)."""
    return [services(path).get(service, {}) for path in files]


def _environment(spec: dict) -> dict:
    environment = spec.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) if "=" in item else (item, "") for item in environment)
    return environment


def service_environment(files, service: str, env: dict[str, str]) -> dict[str, str]:
    """A service's `environment:` as compose resolves it (the last file that sets a name wins),
    interpolated with the rendered variables."""
    return service_environments(files, env, only=service).get(service, {})


def service_environments(files, env: dict[str, str], *, only: str | None = None) -> dict[str, dict[str, str]]:
    """service -> its resolved `environment:` (see service_environment), every service of the files."""
    merged: dict[str, dict[str, str]] = {}
    for path in files:
        for name, spec in services(path).items():
            if only is not None and name != only:
                continue
            target = merged.setdefault(name, {})
            for key, value in _environment(spec).items():
                target[key] = interpolate("" if value is None else str(value), env)
    return merged
