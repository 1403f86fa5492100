"""The rules LeaderWorkerSet's admission webhooks (and the DisaggregatedSet CRD's one CEL rule)
hold custom resources to, which a JSON Schema cannot state. Each is read from kubernetes-sigs/lws at
crds.LWS_RELEASE and names the file and function it restates, so a refusal here reads like the
API server's and says where to look. Paths are field paths as the webhooks write them.
"""

from __future__ import annotations

import math
import re

from bundle.targets.k8s.crds import LWS_RELEASE

_LWS_WEBHOOK = "pkg/webhooks/leaderworkerset_webhook.go"
_DS_WEBHOOK = "pkg/webhooks/disaggregatedset/disaggregatedset_webhook.go"
_DS_CRD = "api/disaggregatedset/v1/disaggregatedset_types.go"
# apimachinery's IsValidPercent and NameIsDNS1035Label.
_PERCENT = re.compile(r"^[0-9]+%$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1035_MAX = 63
# The controller names a role's LeaderWorkerSet <set>-<slice>-<revision>-<role> (GenerateName in
# pkg/utils/disaggregatedset/utils.go); the revision is ComputeRevision's hash, this long.
REVISION_LENGTH = 8
SCALER_NAME_MAX = 253
# LWS annotations whose exclusive placement conflicts with a set's placementPolicy
# (exclusiveTopologyAnnotationKeys in the DisaggregatedSet webhook).
EXCLUSIVE_ANNOTATIONS = ("leaderworkerset.sigs.k8s.io/exclusive-topology",
                         "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology")


def _rule(source: str, function: str) -> str:
    return f"(LWS {LWS_RELEASE} {source} {function})"


def child_name(set_name: str, slice_index: int, role: str) -> str:
    """The longest name the controller gives a role's LeaderWorkerSet in that slice."""
    return f"{set_name}-{slice_index}-{'x' * REVISION_LENGTH}-{role}"


def leaderworkerset(obj: dict) -> list[tuple[tuple, str]]:
    """generalValidate in leaderworkerset_webhook.go (create and update)."""
    out = []
    rule = _rule(_LWS_WEBHOOK, "generalValidate")
    name = obj.get("metadata", {}).get("name", "")
    if not (_DNS1035.match(name) and len(name) <= DNS1035_MAX):
        out.append((("metadata", "name"), f"{name!r} must be a DNS-1035 label (the headless Service is named "
                                          f"after it): lower-case letters, digits and '-', a letter first, at "
                                          f"most {DNS1035_MAX} characters {rule}"))
    spec = obj.get("spec", {})
    replicas = spec.get("replicas", 1)
    if not 0 <= replicas <= 1_000_000:
        out.append((("spec", "replicas"), f"replicas must be between 0 and 1000000 {rule}"))
    out += _size(spec.get("leaderWorkerTemplate", {}), ("spec",), rule)
    rolling = spec.get("rolloutStrategy", {}).get("rollingUpdateConfiguration")
    if rolling is not None:
        path = ("spec", "rolloutStrategy", "rollingUpdateConfiguration")
        if rolling.get("partition", 0) < 0:
            out.append((path + ("partition",), f"must be greater than or equal to 0 {rule}"))
        out += _surge_and_unavailable(rolling, replicas, path, rule)
    return out


def disaggregatedset(obj: dict) -> list[tuple[tuple, str]]:
    """validate, validateRoleRolloutStrategy and validatePlacement in disaggregatedset_webhook.go,
    the CRD's CEL rule on replicas, and the names and sizes of the LeaderWorkerSets the controller
    makes of each role (which the LeaderWorkerSet webhook then admits)."""
    out = []
    name = obj.get("metadata", {}).get("name", "")
    spec = obj.get("spec", {})
    roles = spec.get("roles", [])
    slices = spec.get("slices", 1)
    external = False
    for i, role in enumerate(roles):
        path = ("spec", "roles", i)
        role_spec = role.get("spec", {})
        out += _role_rollout(role_spec, path)
        out += _size(role_spec.get("leaderWorkerTemplate", {}), path + ("spec",),
                     _rule(_LWS_WEBHOOK, "generalValidate"))
        longest = child_name(name, slices - 1, role.get("name", ""))
        if len(longest) > DNS1035_MAX:
            out.append((path + ("name",), f"the controller names this role's LeaderWorkerSet {longest!r} "
                                          f"(<set>-<slice>-<revision>-<role>), {len(longest)} characters; a "
                                          f"LeaderWorkerSet name is a DNS-1035 label of at most {DNS1035_MAX} "
                                          f"{_rule('pkg/utils/disaggregatedset/utils.go', 'GenerateName')}"))
        if (role.get("scaling") or {}).get("mode") == "External":
            external = True
            scaler = f"{name}-{role.get('name', '')}"
            if len(scaler) > SCALER_NAME_MAX:
                out.append((path + ("name",), f"would produce scaler name {scaler!r} exceeding "
                                              f"{SCALER_NAME_MAX} characters {_rule(_DS_WEBHOOK, 'validate')}"))
    if external and slices > 1:
        out.append((("spec", "slices"), "spec.slices > 1 is not supported while any role has scaling.mode: "
                                        f"External {_rule(_DS_WEBHOOK, 'validate')}"))
    static = [r for r in roles if (r.get("scaling") or {}).get("mode") != "External"]
    counts = [r.get("spec", {}).get("replicas") for r in static]
    if not (all(not c for c in counts) or all(c is not None and c > 0 for c in counts)):
        out.append((("spec",), "replicas must be zero for all non-External roles or non-zero for all "
                               f"non-External roles (LWS {LWS_RELEASE} the CRD's x-kubernetes-validations, "
                               f"{_DS_CRD} DisaggregatedSetSpec)"))
    out += _placement(spec.get("placementPolicy"), roles)
    return out


def _role_rollout(role_spec: dict, path: tuple) -> list[tuple[tuple, str]]:
    rule = _rule(_DS_WEBHOOK, "validateRoleRolloutStrategy")
    out = []
    strategy = role_spec.get("rolloutStrategy", {})
    at = path + ("spec", "rolloutStrategy")
    if strategy.get("type", "") not in ("", "RollingUpdate"):
        out.append((at + ("type",), f"Unsupported value {strategy['type']!r}: supported values: "
                                    f"'RollingUpdate', '' {rule}"))
    rolling = strategy.get("rollingUpdateConfiguration")
    if rolling is not None:
        at += ("rollingUpdateConfiguration",)
        if rolling.get("partition"):
            out.append((at + ("partition",), "partition is not supported by DisaggregatedSet; rolling updates "
                                             f"are managed across roles by the DisaggregatedSet controller {rule}"))
        replicas = role_spec.get("replicas")
        if replicas:  # roles with zero or unset replicas are exempt (validateRoleMaxSurgeUnavailable)
            out += _surge_and_unavailable(rolling, replicas, at,
                                          _rule(_DS_WEBHOOK, "validateRoleRolloutStrategy/"
                                                             "validateRoleMaxSurgeUnavailable"))
    return out


def _surge_and_unavailable(rolling: dict, replicas: int, path: tuple, rule: str) -> list[tuple[tuple, str]]:
    """maxSurge and maxUnavailable: each a non-negative count or a percentage of at most 100%, and
    not both 0 once scaled to replicas (surge rounds up, unavailable down)."""
    # The CRD's defaults: maxUnavailable 1, maxSurge 0.
    unavailable, surge = rolling.get("maxUnavailable", 1), rolling.get("maxSurge", 0)
    out = []
    for key, value in (("maxUnavailable", unavailable), ("maxSurge", surge)):
        problem = _int_or_percent(value)
        if problem:
            out.append((path + (key,), f"{problem} {rule}"))
    if out:
        return out  # the combined check runs only on valid values, as in the webhooks
    if both_zero(surge, unavailable, replicas):
        out.append((path + ("maxUnavailable",), f"must not be 0 when `maxSurge` is 0: a rollout could neither "
                                                f"add a new copy nor take an old one away {rule}"))
    return out


def both_zero(surge, unavailable, replicas: int) -> bool:
    """maxSurge and maxUnavailable (valid values) both scale to 0 for `replicas` copies: a rollout
    could neither add a copy nor take one away, so the webhooks refuse it."""
    return bool(replicas) and _scaled(unavailable, replicas, up=False) == 0 and _scaled(surge, replicas, up=True) == 0


def _int_or_percent(value) -> str | None:
    """ValidatePositiveIntOrPercent and IsNotMoreThan100Percent (leaderworkerset_webhook.go)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return "must be an integer or percentage (e.g '5%')"
    if isinstance(value, int):
        return "must be greater than or equal to 0" if value < 0 else None
    if not _PERCENT.match(value):
        return f"{value!r}: a valid percent string must be a numeric string followed by an ending '%'"
    if int(value[:-1]) > 100:
        return "must not be greater than 100%"
    return None


def _scaled(value, total: int, *, up: bool) -> int:
    """apimachinery's intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, int):
        return value
    share = int(value[:-1]) * total / 100
    return math.ceil(share) if up else math.floor(share)


def _size(template: dict, path: tuple, rule: str) -> list[tuple[tuple, str]]:
    if template.get("size", 1) < 1:
        return [(path + ("leaderWorkerTemplate", "size"), f"size must be equal or greater than 1 {rule}")]
    return []


def _placement(policy: dict | None, roles: list[dict]) -> list[tuple[tuple, str]]:
    rule = _rule(_DS_WEBHOOK, "validatePlacement")
    if not policy or policy.get("type", "None") in ("None", ""):
        return []
    out = []
    if not policy.get("topology"):
        out.append((("spec", "placementPolicy", "topology"), f"topology is required when type is not None {rule}"))
    for i, role in enumerate(roles):
        template = role.get("spec", {}).get("leaderWorkerTemplate", {})
        places = [role.get("metadata") or {}, (template.get("leaderTemplate") or {}).get("metadata") or {},
                  (template.get("workerTemplate") or {}).get("metadata") or {}]
        for key in EXCLUSIVE_ANNOTATIONS:
            if any(key in (meta.get("annotations") or {}) for meta in places):
                out.append((("spec", "roles", i), f"the {key!r} annotation must not be combined with a "
                                                  f"non-None spec.placementPolicy.type ({policy['type']}) {rule}"))
                break
    return out
