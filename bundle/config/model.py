"""The typed, frozen view of a schema-valid bundle.yaml: one dataclass per section, built once.

The JSON Schema (bundle.schema.json) stays the validator and the documentation of every key; this
module only turns the merged mapping into values the rest of the driver reads by attribute. Nothing
outside bundle.config reads the raw mapping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal, Mapping

from bundle.config.source import Source
from bundle import topology as registry
from bundle.topology import Service, Topology


def _env_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _frozen_env(data: dict) -> Mapping[str, str]:
    return MappingProxyType({k: _env_value(v) for k, v in data.items()})


def _strings(items) -> tuple[str, ...]:
    return tuple(str(a) for a in items)


@dataclass(frozen=True)
class Model:
    path: str
    served_name: str


@dataclass(frozen=True)
class Network:
    host_address: str
    front_port: int
    worker_port: int
    expose_without_key: bool  # the front door open beyond loopback without api_key_file, on purpose


@dataclass(frozen=True)
class DSpark:
    """levers.dspark: DSpark's parameters; None leaves each to SGLang."""

    block_size: int | None
    sps_table: str | None  # relative to the model folder (mounted at /model)
    confidence_sts: str | None


@dataclass(frozen=True)
class Levers:
    speculative: str  # none | mtp | mtp-light | dspark
    dspark: DSpark
    kv_cache_dtype: str
    moe_runner: str
    sparse_mla: str
    cuda_graphs: bool
    pcie_safe_collectives: bool | Literal["auto"]  # auto: decided per host at launch (levers.Collectives)


@dataclass(frozen=True)
class ServerSection:
    """One server's settings in bundle.yaml: a lone server's section, or prefill's/decode's within a
    disaggregated one (a replicated section holds its copies' own, DpSection)."""

    key_path: tuple[str, ...]
    gpus: tuple[int, ...]
    tp_size: int
    extra_args: tuple[str, ...]
    env: Mapping[str, str]

    @classmethod
    def of(cls, key_path: tuple[str, ...], data: dict) -> ServerSection:
        return cls(key_path, tuple(data["gpus"]), data["tp_size"], _strings(data["extra_args"]),
                   _frozen_env(data["env"]))


@dataclass(frozen=True)
class RouterSection:
    key_path: tuple[str, ...]
    policy: str
    health_check_interval_secs: int
    health_check_timeout_secs: int
    health_failure_threshold: int
    health_success_threshold: int
    request_timeout_secs: int
    worker_startup_timeout_secs: int
    retry_max_retries: int
    cb_failure_threshold: int
    cb_timeout_secs: int
    shutdown_grace_secs: int
    extra_args: tuple[str, ...]

    @classmethod
    def of(cls, key_path: tuple[str, ...], data: dict) -> RouterSection:
        values = {k: v for k, v in data.items() if k != "extra_args"}
        return cls(key_path=key_path, extra_args=_strings(data["extra_args"]), **values)


@dataclass(frozen=True)
class PdSection:
    """The section of a disaggregated topology: its two servers, its router and the KV transfer."""

    key_path: tuple[str, ...]
    transfer_backend: str
    bootstrap_port: int
    share_gpus: bool
    kv_transfer_timeout_secs: int
    prefill: ServerSection
    decode: ServerSection
    router: RouterSection


@dataclass(frozen=True)
class DpSection:
    """The section of a replicated topology: copies of one server (its settings once) and the router."""

    key_path: tuple[str, ...]
    replicas: int
    tp_size: int
    gpus: tuple[int, ...]
    extra_args: tuple[str, ...]
    env: Mapping[str, str]
    router: RouterSection

    def replica_gpus(self, replica: int) -> tuple[int, ...]:
        """Replica i's group: the i-th run of tp_size GPUs (what is left, if the list is short)."""
        return self.gpus[replica * self.tp_size:(replica + 1) * self.tp_size]


# A topology's section of bundle.yaml; which shape follows from the topology's capabilities (_section).
Section = ServerSection | PdSection | DpSection


@dataclass(frozen=True)
class Health:
    start_period: str
    interval: str
    timeout: str
    retries: int


@dataclass(frozen=True)
class Lifecycle:
    restart: str
    stop_grace_period: str
    launch_timeout: str


@dataclass(frozen=True)
class Monitoring:
    """Prometheus' scrape interval and the alert thresholds (bundle/monitoring/rules.py)."""

    scrape_interval: str
    down_for: str
    ttft_objective_ms: float
    tpot_objective_ms: float
    kv_transfer_min_gb_s: float
    kv_cache_full_ratio: float


@dataclass(frozen=True)
class SmokeCheck:
    prompt: str
    expect: str


@dataclass(frozen=True)
class Smoke:
    max_tokens: int
    request_timeout: str
    checks: tuple[SmokeCheck, ...]


@dataclass(frozen=True)
class Baseline:
    label: str | None
    output_throughput: float | None
    tpot_ms: float | None
    ttft_ms: float | None


@dataclass(frozen=True)
class Bench:
    input_len: int
    output_len: int
    concurrency: tuple[int, ...]
    prompts_per_concurrency: int
    level_timeout: str
    range_ratio: float
    dataset_path: str | None
    baseline: Baseline | None


@dataclass(frozen=True)
class Role:
    """One SGLang server of a topology: its service, host GPUs, TP size, extra flags and environment."""

    service: Service
    key_path: tuple[str, ...]  # where its settings live in the config, for messages
    gpus: tuple[int, ...]
    tp_size: int
    extra_args: tuple[str, ...]
    env: Mapping[str, str]

    @property
    def name(self) -> str:
        """The service name (server, prefill, decode, replica-0 ...)."""
        return self.service.name


@dataclass(frozen=True)
class Layout:
    """One topology as bundle.yaml sets it, read once (Deployment.layout): its section, how many replicas
    `up` starts, every SGLang server in the registry's order, and its router (None without one). The render
    and its rules read this one value instead of asking the config piece by piece."""

    topology: Topology
    section: Section
    replicas: int
    roles: tuple[Role, ...]
    router: RouterSection | None


@dataclass(frozen=True)
class Deployment:
    """The merged, schema-valid configuration, typed."""

    source: Source  # the user's file, or the defaults when there is none
    project: str
    model: Model
    image_ref: str | None
    network: Network
    api_key_file: str | None  # resolved to an absolute path
    levers: Levers
    # The topologies' sections, by name (each registry entry's config_section); read them through
    # section(topology), never by a topology's name.
    sections: Mapping[str, Section]
    health: Health
    lifecycle: Lifecycle
    smoke: Smoke
    bench: Bench
    monitoring: Monitoring
    # The sections a wing owns (bundle/targets/sections.py), as the schema checked them and the defaults
    # filled them; the wing gives its own a type (its package's config.py), the core never does.
    wing_sections: Mapping[str, Mapping] = field(repr=False, default_factory=lambda: MappingProxyType({}))

    @property
    def model_path(self) -> str:
        return self.model.path

    @property
    def served_name(self) -> str:
        return self.model.served_name

    def wing_section(self, name: str) -> Mapping:
        """A wing's own section of bundle.yaml (see wing_sections), read-only."""
        return self.wing_sections[name]

    def project_name(self, topology: str) -> str:
        return f"{self.project}-{topology}"

    def section(self, topology: Topology | str) -> Section:
        """The topology's section of bundle.yaml (a PdSection for a disaggregated one, a DpSection for a
        replicated one, else its server's ServerSection)."""
        return self.sections[_entry(topology).config_section]

    def replicas(self, topology: Topology | str) -> int:
        topology = _entry(topology)
        return self.section(topology).replicas if topology.replicated else 1

    def roles(self, topology: Topology | str) -> list[Role]:
        """Every SGLang server `up` starts for `topology` (an entry or its name), in the registry's order."""
        topology = _entry(topology)
        out = []
        for service in topology.active_services(self.replicas(topology)):
            if not service.is_server:
                continue
            if topology.replicated:
                copies = self.section(topology)
                out.append(Role(service, copies.key_path, copies.replica_gpus(service.replica), copies.tp_size,
                                copies.extra_args, copies.env))
            else:
                section = self._server_section(service.config_key)
                out.append(Role(service, section.key_path, section.gpus, section.tp_size,
                                section.extra_args, section.env))
        return out

    def layout(self, topology: Topology | str) -> Layout:
        topology = _entry(topology)
        return Layout(topology, self.section(topology), self.replicas(topology), tuple(self.roles(topology)),
                      self.router(topology))

    def router(self, topology: Topology | str) -> RouterSection | None:
        topology = _entry(topology)
        if not topology.has_router:
            return None
        return self.section(topology).router

    def _server_section(self, key: tuple[str, ...]) -> ServerSection:
        node = self.sections[key[0]]
        for part in key[1:]:
            node = getattr(node, part)
        return node


# The top-level keys of bundle.yaml the core types itself; every other section belongs to a wing and is
# kept whole for it (the schema still declares and checks it, so its settings are checked before any wing runs).
_CORE_KEYS = ("project", "model", "image", "network", "api_key_file", "levers", "health", "lifecycle", "smoke",
              "bench", "monitoring")


def _core_keys() -> set[str]:
    return set(_CORE_KEYS) | {t.config_section for t in registry.TOPOLOGIES.values()}


def _entry(topology: Topology | str) -> Topology:
    return registry.get(topology) if isinstance(topology, str) else topology


def build(source: Source, merged: dict) -> Deployment:
    """The typed Deployment of a merged, schema-valid mapping (the loader's last step)."""
    bench = merged["bench"]
    base = merged.get("bench", {}).get("baseline")
    return Deployment(
        source=source,
        project=merged["project"],
        model=Model(**merged["model"]),
        image_ref=merged["image"]["ref"],
        network=Network(**merged["network"]),
        api_key_file=_resolved_key_file(source, merged.get("api_key_file")),
        levers=Levers(**{**merged["levers"], "dspark": DSpark(**merged["levers"]["dspark"])}),
        sections=MappingProxyType({t.config_section: _section(t, merged[t.config_section])
                                   for t in registry.TOPOLOGIES.values()}),
        health=Health(**merged["health"]),
        lifecycle=Lifecycle(**merged["lifecycle"]),
        smoke=Smoke(max_tokens=merged["smoke"]["max_tokens"], request_timeout=merged["smoke"]["request_timeout"],
                    checks=tuple(SmokeCheck(**c) for c in merged["smoke"]["checks"])),
        bench=Bench(input_len=bench["input_len"], output_len=bench["output_len"],
                    concurrency=tuple(bench["concurrency"]),
                    prompts_per_concurrency=bench["prompts_per_concurrency"],
                    level_timeout=bench["level_timeout"], range_ratio=float(bench["range_ratio"]),
                    dataset_path=bench.get("dataset_path"),
                    baseline=Baseline(base.get("label"), base.get("output_throughput"), base.get("tpot_ms"),
                                      base.get("ttft_ms")) if base else None),
        monitoring=Monitoring(**merged["monitoring"]),
        wing_sections=MappingProxyType({name: MappingProxyType(value) for name, value in merged.items()
                                        if name not in _core_keys() and isinstance(value, dict)}),
    )


def _section(topology: Topology, data: dict) -> Section:
    """A topology's section, shaped by what the topology is (topologies sharing a section share its shape)."""
    key = (topology.config_section,)
    if topology.disaggregated:
        return PdSection(key, transfer_backend=data["transfer_backend"], bootstrap_port=data["bootstrap_port"],
                         share_gpus=data["share_gpus"], kv_transfer_timeout_secs=data["kv_transfer_timeout_secs"],
                         prefill=ServerSection.of(key + ("prefill",), data["prefill"]),
                         decode=ServerSection.of(key + ("decode",), data["decode"]),
                         router=RouterSection.of(key + ("router",), data["router"]))
    if topology.replicated:
        return DpSection(key, replicas=data["replicas"], tp_size=data["tp_size"], gpus=tuple(data["gpus"]),
                         extra_args=_strings(data["extra_args"]), env=_frozen_env(data["env"]),
                         router=RouterSection.of(key + ("router",), data["router"]))
    return ServerSection.of(key, data)


def _resolved_key_file(source: Source, path: str | None) -> str | None:
    if path is None:
        return None
    # Relative paths are relative to the config file, as compose does for its own files.
    base = Path(source.name).parent if source.is_file else Path.cwd()
    return str((base / path).resolve())
