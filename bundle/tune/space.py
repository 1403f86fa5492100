"""What `bundle tune` sweeps: candidates (a name and a partial bundle.yaml of overrides) from the
named levers and their values, narrowed or widened by a search-space file.

The file is checked like bundle.yaml: parsed with line numbers, validated by a JSON Schema
(space.schema.json, whose lever values are bundle.schema.json's own), every problem collected and
reported with file, line, key path and what is allowed, before anything starts.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from bundle import topology as registry
from bundle.config import levers as lever_presets
from bundle.config.loader import schema as bundle_schema
from bundle.config.source import Source, read_yaml
from bundle.errors import ConfigError

SCHEMA_PATH = Path(__file__).resolve().with_name("space.schema.json")
GRAPH_FLAG = "--cuda-graph-max-bs-decode"  # 0.5.23 splits the cap per phase; decode graphs set TPOT

# The named levers and the values tried by default (each differing from the config's own value is a
# candidate). moe_runner: SGLang's auto (flashinfer_mxfp4 here), the original deployment's marlin and
# the Triton fallback; speculative: what levers.SPECULATIVE_ARGS offers; kv_cache_dtype: the two
# SGLang 0.5.23 accepts for DeepSeek-V4; cuda_graph_max_bs: SGLang's own (null) and two caps.
DEFAULT_LEVERS: dict[str, list] = {
    "pcie_safe_collectives": [True, False],
    "cuda_graph_max_bs": [None, 16, 64],
    "speculative": list(lever_presets.SPECULATIVE_ARGS),
    "kv_cache_dtype": ["auto", "bf16"],
    "moe_runner": ["auto", "marlin", "triton"],
}


@dataclass(frozen=True)
class Objective:
    metric: str = "throughput"  # throughput | tpot
    max_tpot_ms: float | None = None
    max_ttft_ms: float | None = None

    def describe(self) -> str:
        if self.metric == "tpot":
            return "minimum mean TPOT at C=1"
        bounds = []
        if self.max_tpot_ms:
            bounds.append(f"mean TPOT <= {self.max_tpot_ms:g} ms")
        if self.max_ttft_ms:
            bounds.append(f"mean TTFT <= {self.max_ttft_ms:g} ms")
        return "maximum output throughput" + (f" at {' and '.join(bounds)}" if bounds else " (any level)")


@dataclass
class Candidate:
    name: str
    overrides: dict  # a partial bundle.yaml
    origin: str  # where it comes from: "the config", "levers.moe_runner", "candidates[0]"
    changes: tuple[str, ...] = ()  # what differs from the config, one "key: value" each
    key: str = ""  # set by plan: hash of the overrides and the config (the resume key)
    skip: str | None = None  # why it cannot run (set by plan)

    @property
    def is_reference(self) -> bool:
        return not self.overrides


@dataclass
class Space:
    source: Source | None  # the file, or None (the defaults)
    levers: dict[str, list]
    candidates: list[dict]  # explicit ones: {name, overrides}, with their index for messages
    include_defaults: bool = True
    bench: dict = field(default_factory=dict)
    objective: dict = field(default_factory=dict)
    budget: str | None = None

    @property
    def name(self) -> str:
        return self.source.name if self.source else "<default levers>"


@lru_cache(maxsize=1)
def schema() -> dict:
    """space.schema.json with bundle.schema.json injected as $defs.bundle (and its own $defs)."""
    space = json.loads(SCHEMA_PATH.read_text())
    bundle = copy.deepcopy(bundle_schema())
    defs = bundle.pop("$defs", {})
    for key in ("$schema", "$id"):
        bundle.pop(key, None)
    space["$defs"] = {**defs, "bundle": bundle}
    return space


def load_space(path: str | Path | None) -> Space:
    """The search space: the file's (schema-checked; one ConfigError listing every problem), or the
    default levers."""
    if path is None:
        return Space(None, copy.deepcopy(DEFAULT_LEVERS), [])
    from bundle.config import schema_check

    source = read_yaml(Path(path))
    data = source.data
    problems = schema_check.problems(data, schema(), source)
    names: dict[str, int] = {}
    for index, item in enumerate(data.get("candidates") or [] if not problems else []):
        name = item["name"]
        where = source.where(("candidates", index, "name"))
        if name in names:
            problems.append(f"{where}: candidates[{index}].name: {name!r} is also candidates[{names[name]}]'s "
                            f"name; give each candidate its own")
        names.setdefault(name, index)
        if name == "defaults":
            problems.append(f"{where}: candidates[{index}].name: 'defaults' names the config as it is "
                            f"(include_defaults); choose another name")
    if problems:
        raise ConfigError(problems, source=source.name)
    given = "levers" in data or "candidates" in data
    return Space(source, dict(data.get("levers") or {}) if given else copy.deepcopy(DEFAULT_LEVERS),
                 list(data.get("candidates") or []), include_defaults=data.get("include_defaults", True),
                 bench=dict(data.get("bench") or {}), objective=dict(data.get("objective") or {}),
                 budget=data.get("budget"))


# ---- candidates -------------------------------------------------------------------------------
def server_sections(topology: str) -> list[tuple[str, ...]]:
    """The bundle.yaml sections whose extra_args reach the topology's servers (dp's replicas share one)."""
    entry = registry.get(topology)
    seen = []
    for service in entry.services:
        if service.is_server and service.config_key not in seen:
            seen.append(service.config_key)
    return seen


def _section(data: dict, key: tuple[str, ...]) -> dict:
    node = data
    for part in key:
        node = node.get(part) or {}
    return node


def _with_graph_cap(extra_args: list, value: int | None) -> list:
    """extra_args with --cuda-graph-max-bs set to `value` (None: removed, SGLang's own choice)."""
    out, skip = [], False
    for token in extra_args:
        if skip:
            skip = False
            continue
        text = str(token)
        if text == GRAPH_FLAG:
            skip = True
            continue
        if text.startswith(GRAPH_FLAG + "="):
            continue
        out.append(token)
    return out + ([GRAPH_FLAG, str(value)] if value is not None else [])


def graph_cap(merged: dict, topology: str) -> int | None:
    """The --cuda-graph-max-bs the config already gives the topology's first server, or None."""
    args = [str(a) for a in _section(merged, server_sections(topology)[0]).get("extra_args") or []]
    for i, token in enumerate(args):
        if token == GRAPH_FLAG and i + 1 < len(args):
            return int(args[i + 1])
        if token.startswith(GRAPH_FLAG + "="):
            return int(token.split("=", 1)[1])
    return None


def lever_overrides(lever: str, value, merged: dict, topology: str) -> dict:
    """One lever at one value, as a partial bundle.yaml."""
    if lever != "cuda_graph_max_bs":
        return {"levers": {lever: value}}
    out: dict = {}
    for key in server_sections(topology):
        args = _with_graph_cap(list(_section(merged, key).get("extra_args") or []), value)
        node = out
        for part in key[:-1]:
            node = node.setdefault(part, {})
        node[key[-1]] = {"extra_args": args}
    return out


def _shown(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else str(value)


def _flat(data: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out += _flat(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}: {json.dumps(value) if not isinstance(value, str) else value}")
    return out


def candidates(space: Space, merged: dict, topology: str) -> list[Candidate]:
    """Every candidate of the space for this config (`merged`: the config with the defaults filled
    in): the config itself first (when included), then one per lever value that differs from the
    config's own, then the explicit ones. Duplicates (same overrides) are kept once."""
    out: list[Candidate] = []
    if space.include_defaults:
        out.append(Candidate("defaults", {}, "the config as it is"))
    current = dict(merged.get("levers") or {})
    current["cuda_graph_max_bs"] = graph_cap(merged, topology)
    for lever, values in space.levers.items():
        for value in values:
            if value == current.get(lever):
                continue
            overrides = lever_overrides(lever, value, merged, topology)
            name = f"{lever}={_shown(value)}"
            out.append(Candidate(name, overrides, f"levers.{lever}",
                                 (f"{lever if lever == 'cuda_graph_max_bs' else 'levers.' + lever}: {_shown(value)}",)))
    for index, item in enumerate(space.candidates):
        out.append(Candidate(item["name"], copy.deepcopy(item["overrides"]), f"candidates[{index}]",
                             tuple(_flat(item["overrides"]))))
    unique, seen = [], set()
    for cand in out:
        token = json.dumps(cand.overrides, sort_keys=True)
        if token in seen:
            continue
        seen.add(token)
        unique.append(cand)
    return unique


def objective_of(space: Space, *, metric: str | None, max_tpot_ms: float | None,
                 max_ttft_ms: float | None) -> Objective:
    """The command line's choice over the file's."""
    base = space.objective
    return Objective(metric=metric or base.get("metric") or "throughput",
                     max_tpot_ms=max_tpot_ms if max_tpot_ms is not None else base.get("max_tpot_ms"),
                     max_ttft_ms=max_ttft_ms if max_ttft_ms is not None else base.get("max_ttft_ms"))
