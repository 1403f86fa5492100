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
class K8sRole:
    """Copies and nodes of one server role on Kubernetes: kubernetes.<the server's config_key>."""

    key_path: tuple[str, ...]  # where it lives in bundle.yaml, for messages
    replicas: int  # LeaderWorkerSet replicas
    nodes: int  # LeaderWorkerSet size: pods per copy, tp_size split evenly over them


@dataclass(frozen=True)
class ModelStorage:
    type: str  # hostPath | pvc
    host_path: str  # model.path unless kubernetes.model_storage.host_path says otherwise
    claim_name: str | None


@dataclass(frozen=True)
class JitCache:
    type: str  # hostPath | pvc | emptyDir
    host_path_root: str
    storage_class: str | None
    size: str


@dataclass(frozen=True)
class Rdma:
    resource: str | None
    count: int
    devices: tuple[str, ...]  # mlx5_0:1, ... -> UCX_NET_DEVICES


@dataclass(frozen=True)
class Placement:
    topology_key: str | None  # a node label naming a domain; None: no placement policy
    exclusive: str  # slice | topology


@dataclass(frozen=True)
class DisaggregatedForm:
    """kubernetes.<a disaggregated topology's section>: the form its servers take (form, slices,
    placement, rollout, external_scaling)."""

    key_path: tuple[str, ...]
    form: str  # DisaggregatedSet | LeaderWorkerSets
    slices: int
    placement: Placement
    max_surge: int | str  # a count or a percentage ("25%"), as LWS's intstr takes them
    max_unavailable: int | str
    external_scaling: tuple[str, ...]  # server roles (prefill, decode) scaled by an autoscaler

    @property
    def one_set(self) -> bool:
        return self.form == "DisaggregatedSet"


@dataclass(frozen=True)
class Kubernetes:
    """bundle.yaml's `kubernetes:` section: what `bundle render --target k8s` adds to the topologies."""

    namespace: str
    image_pull_policy: str
    image_pull_secret: str | None
    gpu_resource: str
    node_selector: Mapping[str, str]
    discovery: str  # selector | dns
    front_service_type: str
    router_replicas: int
    api_key_secret: str | None  # resolved: <project>-api-key when api_key_file is set and this is null
    shm_size: str
    host_ipc: bool
    dist_init_port: int
    model_storage: ModelStorage
    jit_cache: JitCache
    rdma: Rdma
    roles: Mapping[tuple[str, ...], K8sRole]  # a server's config_key (("pd", "decode")) -> its pods
    forms: Mapping[str, DisaggregatedForm]  # a disaggregated topology's config_section -> its form

    def role(self, config_key: tuple[str, ...]) -> K8sRole:
        return self.roles[tuple(config_key)]

    def form(self, config_section: str) -> DisaggregatedForm:
        return self.forms[config_section]


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
    # The topologies' sections, by name (each registry entry's config_section); read them through
    # section(topology), never by a topology's name.
    sections: Mapping[str, Section]
    health: Health
    lifecycle: Lifecycle
    smoke: Smoke
    bench: Bench
    kubernetes: Kubernetes
    monitoring: Monitoring
    # The sections a wing owns (a render target's: `slurm:`), as the schema checked them and the defaults
    # filled them; the wing gives its own a type (bundle/targets/slurm/config.py), the core never does.
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
              "bench", "kubernetes", "monitoring")


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
        kubernetes=_kubernetes(merged),
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


def _kubernetes(merged: dict) -> Kubernetes:
    k8s = merged["kubernetes"]
    storage, cache, rdma = k8s["model_storage"], k8s["jit_cache"], k8s["rdma"]
    secret = k8s["api_key_secret"]
    if secret is None and merged.get("api_key_file"):
        secret = f"{merged['project']}-api-key"
    roles = {}
    for topology in registry.TOPOLOGIES.values():
        for service in topology.servers:
            # kubernetes.<config_key>: the pods of that server (a replicated topology's copies default
            # to its own replica count; a lone server has one copy).
            node = k8s
            for part in service.config_key:
                node = node[part]
            default = merged[topology.config_section]["replicas"] if topology.replicated else 1
            roles[service.config_key] = K8sRole(("kubernetes", *service.config_key),
                                                node.get("replicas") or default, node["nodes"])
    forms = {}
    for topology in registry.TOPOLOGIES.values():
        if topology.disaggregated and topology.config_section not in forms:
            node = k8s[topology.config_section]
            placement, rollout = node["placement"], node["rollout"]
            forms[topology.config_section] = DisaggregatedForm(
                ("kubernetes", topology.config_section), node["form"], node["slices"],
                Placement(placement["topology_key"], placement["exclusive"]),
                rollout["max_surge"], rollout["max_unavailable"], tuple(node["external_scaling"]))
    return Kubernetes(
        namespace=k8s["namespace"], image_pull_policy=k8s["image_pull_policy"],
        image_pull_secret=k8s["image_pull_secret"], gpu_resource=k8s["gpu_resource"],
        node_selector=MappingProxyType(dict(k8s["node_selector"])), discovery=k8s["discovery"],
        front_service_type=k8s["front_service_type"], router_replicas=k8s["router_replicas"],
        api_key_secret=secret, shm_size=k8s["shm_size"], host_ipc=k8s["host_ipc"],
        dist_init_port=k8s["dist_init_port"],
        model_storage=ModelStorage(storage["type"], storage["host_path"] or merged["model"]["path"],
                                   storage["claim_name"]),
        jit_cache=JitCache(cache["type"], cache["host_path_root"], cache["storage_class"], cache["size"]),
        rdma=Rdma(rdma["resource"], rdma["count"], tuple(rdma["devices"])),
        roles=MappingProxyType(roles), forms=MappingProxyType(forms),
    )


def _resolved_key_file(source: Source, path: str | None) -> str | None:
    if path is None:
        return None
    # Relative paths are relative to the config file, as compose does for its own files.
    base = Path(source.name).parent if source.is_file else Path.cwd()
    return str((base / path).resolve())
