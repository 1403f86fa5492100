"""The typed, frozen view of a schema-valid bundle.yaml: one dataclass per section, built once.

The JSON Schema (bundle.schema.json) stays the validator and the documentation of every key; this
module only turns the merged mapping into values the rest of the driver reads by attribute. Nothing
outside bundle.config reads the raw mapping.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Levers:
    speculative: str  # none | mtp | mtp-light
    kv_cache_dtype: str
    moe_runner: str
    sparse_mla: str
    cuda_graphs: bool
    pcie_safe_collectives: bool | Literal["auto"]  # auto: decided per host at launch (levers.Collectives)


@dataclass(frozen=True)
class ServerSection:
    """A server section of bundle.yaml (tp4, pd.prefill, pd.decode; dp holds the replicas')."""

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
    transfer_backend: str
    bootstrap_port: int
    share_gpus: bool
    kv_transfer_timeout_secs: int
    prefill: ServerSection
    decode: ServerSection
    router: RouterSection


@dataclass(frozen=True)
class DpSection:
    replicas: int
    tp_size: int
    gpus: tuple[int, ...]
    extra_args: tuple[str, ...]
    env: Mapping[str, str]
    router: RouterSection

    def replica_gpus(self, replica: int) -> tuple[int, ...]:
        """Replica i's group: the i-th run of tp_size GPUs (what is left, if the list is short)."""
        return self.gpus[replica * self.tp_size:(replica + 1) * self.tp_size]


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
class Deployment:
    """The merged, schema-valid configuration, typed."""

    source: Source  # the user's file, or the defaults when there is none
    project: str
    model: Model
    image_ref: str | None
    network: Network
    api_key_file: str | None  # resolved to an absolute path
    levers: Levers
    tp4: ServerSection
    pd: PdSection
    dp: DpSection
    health: Health
    lifecycle: Lifecycle
    smoke: Smoke
    bench: Bench

    @property
    def model_path(self) -> str:
        return self.model.path

    @property
    def served_name(self) -> str:
        return self.model.served_name

    def project_name(self, topology: str) -> str:
        return f"{self.project}-{topology}"

    def replicas(self, topology: Topology | str) -> int:
        return self.dp.replicas if _entry(topology).max_replicas > 1 else 1

    def roles(self, topology: Topology | str) -> list[Role]:
        """Every SGLang server `up` starts for `topology` (an entry or its name), in the registry's order."""
        topology = _entry(topology)
        out = []
        for service in topology.active_services(self.replicas(topology)):
            if not service.is_server:
                continue
            if service.config_key == ("dp",):
                dp = self.dp
                out.append(Role(service, ("dp",), dp.replica_gpus(service.replica), dp.tp_size,
                                dp.extra_args, dp.env))
            else:
                section = self._server_section(service.config_key)
                out.append(Role(service, section.key_path, section.gpus, section.tp_size,
                                section.extra_args, section.env))
        return out

    def router(self, topology: Topology | str) -> RouterSection | None:
        topology = _entry(topology)
        if not topology.has_router:
            return None
        return getattr(self, topology.config_section).router

    def _server_section(self, key: tuple[str, ...]) -> ServerSection:
        node = self
        for part in key:
            node = getattr(node, part)
        return node


def _entry(topology: Topology | str) -> Topology:
    return registry.get(topology) if isinstance(topology, str) else topology


def build(source: Source, merged: dict) -> Deployment:
    """The typed Deployment of a merged, schema-valid mapping (the loader's last step)."""
    pd, dp, bench = merged["pd"], merged["dp"], merged["bench"]
    base = merged.get("bench", {}).get("baseline")
    return Deployment(
        source=source,
        project=merged["project"],
        model=Model(**merged["model"]),
        image_ref=merged["image"]["ref"],
        network=Network(**merged["network"]),
        api_key_file=_resolved_key_file(source, merged.get("api_key_file")),
        levers=Levers(**merged["levers"]),
        tp4=ServerSection.of(("tp4",), merged["tp4"]),
        pd=PdSection(transfer_backend=pd["transfer_backend"], bootstrap_port=pd["bootstrap_port"],
                     share_gpus=pd["share_gpus"], kv_transfer_timeout_secs=pd["kv_transfer_timeout_secs"],
                     prefill=ServerSection.of(("pd", "prefill"), pd["prefill"]),
                     decode=ServerSection.of(("pd", "decode"), pd["decode"]),
                     router=RouterSection.of(("pd", "router"), pd["router"])),
        dp=DpSection(replicas=dp["replicas"], tp_size=dp["tp_size"], gpus=tuple(dp["gpus"]),
                     extra_args=_strings(dp["extra_args"]), env=_frozen_env(dp["env"]),
                     router=RouterSection.of(("dp", "router"), dp["router"])),
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
    )


def _resolved_key_file(source: Source, path: str | None) -> str | None:
    if path is None:
        return None
    # Relative paths are relative to the config file, as compose does for its own files.
    base = Path(source.name).parent if source.is_file else Path.cwd()
    return str((base / path).resolve())
