"""bundle.yaml -> one validated, typed Deployment (the embedded defaults fill every gap).

Order: parse YAML (syntax errors with line and column) -> JSON Schema (every error collected, each
with its line and key path, "did you mean" for unknown keys) -> merge onto the defaults. Semantic
rules that span keys live in bundle.rules.
"""

from __future__ import annotations

import copy
import json
import os
from functools import lru_cache
from pathlib import Path

from bundle.config import assembly, schema_check
from bundle.config.model import Deployment, build
from bundle.config.source import DEFAULTS_NAME, Source, parse_yaml, read_yaml
from bundle.errors import ConfigError, UsageError

HERE = Path(__file__).resolve().parent
SCHEMA_PATH = HERE / "bundle.schema.json"  # the core's keys; each wing's section comes from its package
DEFAULTS_PATH = HERE / "defaults.yaml"
DEFAULT_CONFIG_NAMES = ("bundle.yaml", "bundle.yml")

# The sections the wings bring (assembly.WingSection), handed down by the entry point that knows the
# registries: the config stands below the wings and never imports them (tests/test_import_graph.py).
_wings: tuple[assembly.WingSection, ...] | None = None


def install_sections(wings) -> None:
    """Use these wings' sections (bundle/targets/sections.py's SECTIONS) from now on. Called once by each
    entry point: bundle/cli.py, the test suite's conftest, docsgen."""
    global _wings
    if _wings == tuple(wings):  # the same again (main() called twice in one process): keep what is built
        return
    _wings = tuple(wings)
    _schema.cache_clear()
    _defaults_source.cache_clear()


def _sections() -> tuple[assembly.WingSection, ...]:
    if _wings is None:  # a programming error of a new entry point, not a user's: say what it forgot
        raise RuntimeError("the wings' config sections were never installed: call bundle.config.loader."
                           "install_sections(bundle.targets.sections.SECTIONS) first, as bundle/cli.py does")
    return _wings


def schema() -> dict:
    """bundle.yaml's whole schema: the core's and every installed wing's section (config/assembly.py). A
    copy: a caller may change its own."""
    return copy.deepcopy(_schema())


@lru_cache(maxsize=1)
def _schema() -> dict:
    return assembly.schema(json.loads(SCHEMA_PATH.read_text()), _sections())


@lru_cache(maxsize=1)
def _defaults_source() -> Source:
    """The embedded defaults: the core's and every installed wing's."""
    return assembly.defaults(parse_yaml(DEFAULTS_PATH.read_text(), DEFAULTS_NAME), _sections())


def defaults_data() -> dict:
    """A copy of the embedded defaults as a mapping (what a user's file is merged onto)."""
    return copy.deepcopy(_defaults_source().data)


def find_config(explicit: str | None) -> Path | None:
    """-c FILE, else $BUNDLE_CONFIG, else ./bundle.yaml if present, else None (embedded defaults)."""
    if explicit is not None:
        if not explicit.strip():
            raise UsageError("-c was given an empty file name",
                             hint="name your bundle.yaml, or leave out -c to use the embedded defaults")
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
        if not user:
            # An empty file would otherwise mean the embedded defaults, and with them the default
            # compose project that someone else on this host may be running.
            raise ConfigError([f"{source.name}: the file is empty (no keys); write the keys to override "
                               f"(see docs/configuration.md), or leave out -c to use the embedded "
                               f"defaults (project {_defaults_source().data['project']!r})"],
                              source=source.name)
        problems = schema_problems(user, source)
        if problems:
            raise ConfigError(problems, source=source.name)
    merged = deep_merge(copy.deepcopy(_defaults_source().data), user)
    return build(source, merged)


def deep_merge(base: dict, override: dict) -> dict:
    """Mappings merge key by key; every other value (lists too) replaces the default."""
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def schema_problems(data: dict, source: Source) -> list[str]:
    """Every schema violation in `data`, one line each: 'file:line: key.path: what is wrong; allowed'."""
    return schema_check.problems(data, _schema(), source)
