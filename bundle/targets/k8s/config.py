"""bundle.yaml's `kubernetes:` section, typed: what `bundle render --target k8s` adds to a topology (the
namespace, images, storage, RDMA, and the pods of each server role). Compose ignores it.

The wing owns its section: its schema (config.schema.json) and defaults (defaults.yaml) sit beside this
file, the config loader adds them to the core's, and the core keeps the merged section untyped
(Deployment.wing_section); only this module gives it a type, so deleting the wing's folder leaves nothing
of Kubernetes in the core."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

from bundle import topology as registry
from bundle.targets.k8s import SECTION

if TYPE_CHECKING:
    from bundle.config.model import Deployment


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


def of(dep: Deployment) -> Kubernetes:
    """The deployment's `kubernetes:` section, typed."""
    k8s = dep.wing_section(SECTION)
    storage, cache, rdma = k8s["model_storage"], k8s["jit_cache"], k8s["rdma"]
    secret = k8s["api_key_secret"]
    if secret is None and dep.api_key_file:
        secret = f"{dep.project}-api-key"
    roles = {}
    for topology in registry.TOPOLOGIES.values():
        for service in topology.servers:
            # kubernetes.<config_key>: the pods of that server (a replicated topology's copies default
            # to its own replica count; a lone server has one copy).
            node = k8s
            for part in service.config_key:
                node = node[part]
            roles[service.config_key] = K8sRole((SECTION, *service.config_key),
                                                node.get("replicas") or dep.replicas(topology), node["nodes"])
    forms = {}
    for topology in registry.TOPOLOGIES.values():
        if topology.disaggregated and topology.config_section not in forms:
            node = k8s[topology.config_section]
            placement, rollout = node["placement"], node["rollout"]
            forms[topology.config_section] = DisaggregatedForm(
                (SECTION, topology.config_section), node["form"], node["slices"],
                Placement(placement["topology_key"], placement["exclusive"]),
                rollout["max_surge"], rollout["max_unavailable"], tuple(node["external_scaling"]))
    return Kubernetes(
        namespace=k8s["namespace"], image_pull_policy=k8s["image_pull_policy"],
        image_pull_secret=k8s["image_pull_secret"], gpu_resource=k8s["gpu_resource"],
        node_selector=MappingProxyType(dict(k8s["node_selector"])), discovery=k8s["discovery"],
        front_service_type=k8s["front_service_type"], router_replicas=k8s["router_replicas"],
        api_key_secret=secret, shm_size=k8s["shm_size"], host_ipc=k8s["host_ipc"],
        dist_init_port=k8s["dist_init_port"],
        model_storage=ModelStorage(storage["type"], storage["host_path"] or dep.model_path, storage["claim_name"]),
        jit_cache=JitCache(cache["type"], cache["host_path_root"], cache["storage_class"], cache["size"]),
        rdma=Rdma(rdma["resource"], rdma["count"], tuple(rdma["devices"])),
        roles=MappingProxyType(roles), forms=MappingProxyType(forms),
    )
