"""Semantic rules of the Kubernetes render that span keys of bundle.yaml (the schema holds each key
alone). All problems are collected; each names the file, the line, the key path and the fix."""

from __future__ import annotations

import re

from bundle.config.model import Deployment
from bundle.targets.k8s import config as k8s_config
from bundle.config.source import format_path
from bundle.rules import exposure
from bundle.targets.k8s import commands
from bundle.targets.k8s import crds, lws_webhook, validation as manifests
from bundle.rules.check import RulesReport
from bundle.topology import Topology

# LeaderWorkerSet names its StatefulSets and pods after itself (<lws>-<group>-<worker>) and labels
# them with revision hashes; a name past this leaves no room under Kubernetes' 63-character limit.
MAX_WORKLOAD_NAME = 45
# Service types that publish the front door outside the cluster (ClusterIP stays inside).
OUTSIDE_SERVICE_TYPES = ("NodePort", "LoadBalancer")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def check(dep: Deployment, topology: Topology) -> RulesReport:
    found = RulesReport()
    error = found.errors_of(dep.source)

    k8s = k8s_config.of(dep)
    base = dep.project_name(topology.name)
    longest = f"{base}-{max((s.name for s in topology.services), key=len)}"
    form = k8s.form(topology.config_section) if topology.disaggregated else None
    if form is not None and form.one_set:
        # The controller names each role's LeaderWorkerSet <set>-<slice>-<revision>-<role>.
        longest = lws_webhook.child_name(base, form.slices - 1, max((s.name for s in topology.services), key=len))
    if not _DNS_LABEL.match(base):
        error(("project",), f"{dep.project!r} gives the Kubernetes names {base!r}, which may hold only "
                            f"lower-case letters, digits and '-'; rename the project (e.g. "
                            f"{dep.project.replace('_', '-')!r})")
    elif len(longest) > MAX_WORKLOAD_NAME:
        error(("project",), f"{longest!r} is {len(longest)} characters; Kubernetes names of the workloads "
                            f"must stay within {MAX_WORKLOAD_NAME}: shorten project")
    if k8s.model_storage.type == "pvc" and not k8s.model_storage.claim_name:
        error(("kubernetes", "model_storage", "claim_name"),
              "model_storage.type is pvc but no claim is named; name the PersistentVolumeClaim that holds "
              "the weights, or use type: hostPath")
    if form is not None:
        for path, text in _form_problems(form, k8s.discovery,
                                         {**{s.name: k8s.role(s.config_key).replicas for s in topology.servers},
                                          topology.router.name: k8s.router_replicas}):
            error(path, text)
    seen = set()
    for role in dep.roles(topology):
        if role.service.config_key in seen:
            continue
        seen.add(role.service.config_key)
        pods = k8s.role(role.service.config_key)
        if role.tp_size % pods.nodes:
            error(pods.key_path + ("nodes",),
                  f"tp_size {role.tp_size} ({format_path(role.key_path + ('tp_size',))}) does not divide "
                  f"over {pods.nodes} nodes; each node runs tp_size / nodes ranks: use a divisor of "
                  f"{role.tp_size}")
        managed = set()
        if pods.nodes > 1:
            managed |= set(commands.MULTI_NODE_FLAGS)
        if topology.disaggregated and k8s.rdma.devices \
                and dep.section(topology).transfer_backend in commands.IB_TRANSFER_BACKENDS:
            managed.add(commands.IB_DEVICE_FLAG)
        for index, token in enumerate(role.extra_args):
            flag = str(token).split("=", 1)[0]
            if flag in managed:
                error(role.key_path + ("extra_args", index),
                      f"{flag} is set by the Kubernetes render (from {format_path(pods.key_path)} and "
                      f"kubernetes.rdma); change those keys instead of passing the flag")
    if k8s.front_service_type in OUTSIDE_SERVICE_TYPES:
        text = exposure.unkeyed(dep, topology, f"is a {k8s.front_service_type} Service, reachable from "
                                               f"outside the cluster,")
        if text:
            path = ("kubernetes", "front_service_type")
            found.warning(f"{dep.source.where(path)}: {format_path(path)}: {text}")
    return found


def _form_problems(form, discovery: str, replicas: dict[str, int]) -> list[tuple[tuple, str]]:
    """kubernetes.<section>'s form keys, against the DisaggregatedSet webhook's rules; `replicas`:
    each role's copies, which percentages scale to."""
    out = []
    if not form.one_set:
        return out
    if form.external_scaling and discovery != "selector":
        out.append((form.key_path + ("external_scaling",),
                    f"{list(form.external_scaling)} scale by an autoscaler, but kubernetes.discovery: "
                    f"{discovery} gives smg a fixed list of worker URLs, so copies it adds would get no "
                    f"traffic: use discovery: selector"))
    if form.external_scaling and form.slices > 1:
        out.append((form.key_path + ("slices",),
                    f"slices {form.slices} with external_scaling {list(form.external_scaling)}: the "
                    f"DisaggregatedSet webhook refuses spec.slices > 1 while a role scales externally "
                    f"(disaggregatedset_webhook.go validate); use one slice or drop external_scaling"))
    surge, unavailable = form.max_surge, form.max_unavailable
    too_much = [key for key, value in (("max_surge", surge), ("max_unavailable", unavailable))
                if isinstance(value, str) and int(value[:-1]) > 100]
    for key in too_much:
        out.append((form.key_path + ("rollout", key), "is more than 100%; use at most 100%"))
    zero = [f"{role} ({count} {'copy' if count == 1 else 'copies'})" for role, count in replicas.items()
            if role not in form.external_scaling and lws_webhook.both_zero(surge, unavailable, count)]
    if zero and not too_much:
        out.append((form.key_path + ("rollout",),
                    f"max_surge {surge} and max_unavailable {unavailable} are both 0 for {', '.join(zero)}, "
                    f"which the LWS webhooks refuse (a rollout could neither add a new copy nor take an old "
                    f"one away; disaggregatedset_webhook.go validateRoleRolloutStrategy): set max_surge: 1 "
                    f"(needs room for one more copy of each role) or max_unavailable: 1"))
    return out


# What problems() holds the manifests to, for `bundle render`'s summary.
CHECKED = (f"built-in kinds by kubernetes-validate (Kubernetes {manifests.KUBERNETES_VERSION}, strict), "
           f"LeaderWorkerSet and DisaggregatedSet by LWS {crds.LWS_RELEASE}'s own CRDs and its webhooks' rules, "
           f"the Prometheus Operator's PodMonitor/PrometheusRule by "
           f"{', '.join(p.name for p in manifests.OPERATOR_SCHEMAS.values())}")


def problems(rendered) -> list[str]:
    """What the manifests break (K8sRendered): built-in kinds by kubernetes-validate, LeaderWorkerSet
    and the Prometheus Operator's kinds by their schemas, the file names."""
    return manifests.problems(rendered.objects, rendered.file_names())
