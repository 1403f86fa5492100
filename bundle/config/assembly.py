"""The schema and the defaults of bundle.yaml, put together: the core's own (bundle.schema.json,
defaults.yaml: the topologies, levers, health, smoke, bench, ...) and each wing's section, declared in the
wing's own package (bundle/targets/sections.py lists them). The core's files name no wing; a wing that is
removed takes its keys with it, and the schema then refuses them (the core schema's "x-unknown" says how).

A wing's declaration (`WingSection`) is its package's own file: SECTION (its key in bundle.yaml), READ_BY
(who reads it, for the reference), SCHEMA (the section's JSON Schema, with its own $defs) and DEFAULTS (a
YAML file holding `<SECTION>:` and its defaults).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from bundle.config.source import Source, parse_yaml


class WingSection(Protocol):
    SECTION: str
    READ_BY: str
    SCHEMA: Path
    DEFAULTS: Path


def schema(core: dict, wings: Iterable[WingSection]) -> dict:
    """The core schema with each wing's section under `properties.<SECTION>` (its $defs joined to the
    core's; a wing's schema says under which wing it belongs with "x-wing")."""
    out = copy.deepcopy(core)
    for wing in wings:
        fragment = json.loads(Path(wing.SCHEMA).read_text())
        _refuse_clash(wing.SECTION, out["properties"], "a key the core or another wing declares")
        for name in fragment.get("$defs", {}):
            _refuse_clash(name, out.setdefault("$defs", {}), f"{wing.SECTION}'s $defs: a definition the core has")
        out["$defs"].update(fragment.pop("$defs", {}))
        for key in ("$schema", "$id", "title"):
            fragment.pop(key, None)
        out["properties"][wing.SECTION] = {**fragment, "x-wing": wing.READ_BY}
    return out


def defaults(core: Source, wings: Iterable[WingSection]) -> Source:
    """The core's defaults with each wing's (its DEFAULTS file holds `<SECTION>:` only). Lines stay the
    core file's: a wing's keys are named without a line, not with another file's."""
    data = copy.deepcopy(core.data)
    for wing in wings:
        own = parse_yaml(Path(wing.DEFAULTS).read_text(), str(wing.DEFAULTS)).data
        if set(own) != {wing.SECTION}:
            raise ValueError(f"{wing.DEFAULTS}: holds {sorted(own)}; a wing's defaults hold its own section "
                             f"({wing.SECTION}:) only")
        _refuse_clash(wing.SECTION, data, "a key the core's defaults or another wing's have")
        data.update(own)
    return Source(core.name, data, dict(core.lines))


def _refuse_clash(name: str, taken: dict, what: str) -> None:
    # A wing's own mistake, found by the test suite (tests/test_config.py): not a user's error.
    if name in taken:
        raise ValueError(f"a wing's section {name!r} clashes with {what}")
