"""A disaggregated topology as one DisaggregatedSet (disaggregatedset.x-k8s.io/v1, LWS v0.9.0+):
prefill, decode and the router are roles of one set, so a new revision (a new image, new flags)
brings up a complete new set of all three and retires the old one together, and a router only ever
pairs the prefill and decode leaders of its own revision (and slice).

The controller makes each role a LeaderWorkerSet named <set>-<slice>-<revision>-<role>
(pkg/utils/disaggregatedset/utils.go GenerateName at LWS v0.10.0) and merges its own labels into
the role's pod templates over the ones written here (pkg/controllers/disaggregatedset/
lws_manager.go Create: mergeLabels(user, GenerateLabels(...))). The router reads its pod's revision
and slice labels through the downward API, and smg's selectors (or the leaders' DNS names) carry
them as $(VAR), which kubelet expands in the container's args.
"""

from __future__ import annotations

from bundle.targets.k8s import commands as cmd

DISAGGREGATED_API = "disaggregatedset.x-k8s.io/v1"
# The labels the controller puts on every pod of a role (GenerateLabels, utils.go; the keys are
# api/disaggregatedset/v1/disaggregatedset_types.go's SetNameLabelKey ... RevisionLabelKey).
SET_NAME_LABEL = "disaggregatedset.x-k8s.io/name"
ROLE_LABEL = "disaggregatedset.x-k8s.io/role"
SLICE_LABEL = "disaggregatedset.x-k8s.io/slice"  # v0.10.0+: absent on a v0.9 controller's pods
REVISION_LABEL = "disaggregatedset.x-k8s.io/revision"
# The router's container environment, from its own pod's labels (downward API).
REVISION_ENV = "DS_REVISION"
SLICE_ENV = "DS_SLICE"
# What each form needs of the cluster's LeaderWorkerSet install.
NEEDS_SET = "LeaderWorkerSet v0.9.0+ (its DisaggregatedSet CRD)"
NEEDS_SET_V010 = "LeaderWorkerSet v0.10.0+ (slices, placementPolicy, scaling.mode: External)"
NEEDS_LWS = "LeaderWorkerSet v0.3.0+"
PLACEMENT_TYPES = {"slice": "ExclusiveSlice", "topology": "ExclusiveTopology"}


def needs(form) -> str:
    """The LWS release a DisaggregatedForm's manifests need."""
    if not form.one_set:
        return NEEDS_LWS
    if form.slices > 1 or form.placement.topology_key or form.external_scaling:
        return NEEDS_SET_V010
    return NEEDS_SET


def pod_labels(set_name: str, role: str) -> dict[str, str]:
    """The labels the controller adds to a role's pods that do not depend on the revision."""
    return {SET_NAME_LABEL: set_name, ROLE_LABEL: role}


def router_env(form) -> dict[str, dict]:
    """name -> valueFrom: the revision (and, with slices, the slice) of the router's own pod."""
    labels = {REVISION_ENV: REVISION_LABEL}
    if form.slices > 1:
        labels[SLICE_ENV] = SLICE_LABEL
    return {env: {"fieldRef": {"fieldPath": f"metadata.labels['{label}']"}} for env, label in labels.items()}


def leader_selector(set_name: str, role: str, form) -> dict[str, str]:
    """The labels of exactly one revision's (and slice's) leaders of `role`. The slice label is
    only asked for with slices > 1: a v0.9 controller sets none, and one slice needs none."""
    out = {**pod_labels(set_name, role), REVISION_LABEL: f"$({REVISION_ENV})"}
    if form.slices > 1:
        out[SLICE_LABEL] = f"$({SLICE_ENV})"
    out[cmd.LWS_WORKER_INDEX_LABEL] = "0"
    return out


def child_name(set_name: str, role: str, form) -> str:
    """The name of the router's own revision's LeaderWorkerSet of `role` (v0.10.0's naming)."""
    slice_ = f"$({SLICE_ENV})" if form.slices > 1 else "0"
    return f"{set_name}-{slice_}-$({REVISION_ENV})-{role}"


def role(name: str, group: dict, form, *, external: bool) -> dict:
    """One entry of spec.roles: a LeaderWorkerSet's spec with the set's rollout."""
    spec = dict(group)
    if external:
        spec.pop("replicas")  # the DisaggregatedSetRoleScaler's replicas rule (the webhook ignores these)
    spec["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": {
        "maxSurge": form.max_surge, "maxUnavailable": form.max_unavailable}}
    out = {"name": name}
    if external:
        out["scaling"] = {"mode": "External"}
    out["spec"] = spec
    return out


def spec(roles: list[dict], form) -> dict:
    out = {"roles": roles}
    if form.slices > 1:
        out["slices"] = form.slices
    if form.placement.topology_key:
        out["placementPolicy"] = {"type": PLACEMENT_TYPES[form.placement.exclusive],
                                  "topology": form.placement.topology_key}
    return out


def scaler_name(set_name: str, role: str) -> str:
    """The DisaggregatedSetRoleScaler the controller creates for an External role (ScalerName,
    pkg/controllers/disaggregatedset/scaler_manager.go). It adopts only a scaler it owns, so the
    render does not write one: an HPA or KEDA targets this name."""
    return f"{set_name}-{role}"
