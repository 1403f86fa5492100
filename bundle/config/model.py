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

from bundle.config import slurm as slurm_section
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
    """Copies and nodes of one server role on Kubernetes (kubernetes.tp4, .pd.prefill, .pd.decode, .dp)."""

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

    def role(self, config_key: tuple[str, ...]) -> K8sRole:
        return self.roles[tuple(config_key)]


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
    kubernetes: Kubernetes
    monitoring: Monitoring
    slurm: slurm_section.Slurm

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
        levers=Levers(**{**merged["levers"], "dspark": DSpark(**merged["levers"]["dspark"])}),
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
        kubernetes=_kubernetes(merged),
        monitoring=Monitoring(**merged["monitoring"]),
        slurm=slurm_section.build(merged),
    )


def _kubernetes(merged: dict) -> Kubernetes:
    k8s = merged["kubernetes"]
    storage, cache, rdma = k8s["model_storage"], k8s["jit_cache"], k8s["rdma"]
    secret = k8s["api_key_secret"]
    if secret is None and merged.get("api_key_file"):
        secret = f"{merged['project']}-api-key"
    roles = {("tp4",): K8sRole(("kubernetes", "tp4"), 1, k8s["tp4"]["nodes"])}
    for name in ("prefill", "decode"):
        section = k8s["pd"][name]
        roles[("pd", name)] = K8sRole(("kubernetes", "pd", name), section["replicas"] or 1, section["nodes"])
    roles[("dp",)] = K8sRole(("kubernetes", "dp"), k8s["dp"]["replicas"] or merged["dp"]["replicas"],
                             k8s["dp"]["nodes"])
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
        roles=MappingProxyType(roles),
    )


def _resolved_key_file(source: Source, path: str | None) -> str | None:
    if path is None:
        return None
    # Relative paths are relative to the config file, as compose does for its own files.
    base = Path(source.name).parent if source.is_file else Path.cwd()
    return str((base / path).resolve())
