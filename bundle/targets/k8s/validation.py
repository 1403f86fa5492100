"""Rendered Kubernetes manifests checked offline, before anything is written.

Built-in kinds go through kubernetes-validate (strict: an unknown field fails) against the schemas
of KUBERNETES_VERSION. kubernetes-validate only warns on custom resources, so LeaderWorkerSet's kinds
(LeaderWorkerSet, DisaggregatedSet) are held to the LWS release's own CRDs (crds.py, strict) and to
the rules its webhooks add (lws_webhook.py), and each of their pod templates goes through
kubernetes-validate as a core/v1 PodTemplate. Every problem is collected, one line each, naming the
manifest and the field path.
"""

from __future__ import annotations

import json
from pathlib import Path

from bundle.config.source import format_path
from bundle.targets.k8s import crds, lws_webhook

# The oldest Kubernetes the manifests are checked against; LeaderWorkerSet itself needs 1.26+.
KUBERNETES_VERSION = "1.30"
LWS_API = "leaderworkerset.x-k8s.io/v1"
DISAGGREGATED_API = "disaggregatedset.x-k8s.io/v1"
# The webhook rules of each LWS kind the render writes.
WEBHOOK_RULES = {(LWS_API, "LeaderWorkerSet"): lws_webhook.leaderworkerset,
                 (DISAGGREGATED_API, "DisaggregatedSet"): lws_webhook.disaggregatedset}
# The Prometheus Operator's kinds (monitoring.coreos.com/v1), held to schemas of the fields written.
OPERATOR_SCHEMAS = {("monitoring.coreos.com/v1", kind): Path(__file__).resolve().parent / "schemas" / file
                    for kind, file in (("PodMonitor", "podmonitor-v1.schema.json"),
                                       ("PrometheusRule", "prometheusrule-v1.schema.json"))}


def problems(objects, names) -> list[str]:
    """Every schema problem of `objects` (written as `names`), one line each: 'file: path: what'."""
    out = []
    for name, obj in zip(names, objects):
        kind = (obj.get("apiVersion"), obj.get("kind"))
        if kind in crds.SOURCES:
            out += [f"{name}: {line}" for line in custom_resource_problems(obj)]
        elif kind in OPERATOR_SCHEMAS:
            schema = json.loads(OPERATOR_SCHEMAS[kind].read_text())
            out += [f"{name}: {line}" for line in schema_problems(obj, schema)]
        else:
            out += [f"{name}: {line}" for line in builtin_problems(obj)]
    return out


def schema_problems(obj: dict, schema: dict) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft7Validator(schema)
    return [_line(tuple(e.absolute_path), _message(e)) for e in
            sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))]


def custom_resource_problems(obj: dict) -> list[str]:
    """A LeaderWorkerSet-release kind: its CRD's schema, its webhook's rules (only on a
    schema-valid object, as the API server admits), and each pod template as core/v1 has it."""
    kind = (obj["apiVersion"], obj["kind"])
    out = schema_problems(obj, crds.schema(*kind))
    if not out and kind in WEBHOOK_RULES:
        out = [_line(path, text) for path, text in WEBHOOK_RULES[kind](obj)]
    for prefix, template in _pod_templates(obj):
        wrapped = {"apiVersion": "v1", "kind": "PodTemplate",
                   "metadata": {"name": obj.get("metadata", {}).get("name", "lws")}, "template": template}
        out += [_line(prefix + path[1:], text) for path, text in _kubernetes_validate(wrapped)]
    return out


def lws_problems(obj: dict) -> list[str]:
    """A LeaderWorkerSet's problems (custom_resource_problems)."""
    return custom_resource_problems(obj)


def _pod_templates(obj: dict):
    spec = obj.get("spec", {})
    groups = [(("spec",), spec)]
    if obj.get("kind") == "DisaggregatedSet":
        groups = [(("spec", "roles", i, "spec"), role.get("spec", {}))
                  for i, role in enumerate(spec.get("roles", [])) if isinstance(role, dict)]
    for at, group in groups:
        template = group.get("leaderWorkerTemplate", {}) if isinstance(group, dict) else {}
        for key in ("leaderTemplate", "workerTemplate"):
            if isinstance(template.get(key), dict):
                yield at + ("leaderWorkerTemplate", key), template[key]


def builtin_problems(obj: dict) -> list[str]:
    return [_line(path, text) for path, text in _kubernetes_validate(obj)]


def _kubernetes_validate(obj: dict) -> list[tuple[tuple, str]]:
    try:
        import kubernetes_validate  # the `k8s` extra: 108 MB of schemas a GPU host's driver does not need
    except ImportError:
        from bundle.errors import EnvironmentProblem

        raise EnvironmentProblem("checking Kubernetes manifests needs the package kubernetes-validate (the driver's "
                                 "`k8s` extra), which is not installed",
                                 hint="`make install`, or `pip install -e '.[k8s]'` (pipx: `pipx inject "
                                      "sglang-sm120-bundle kubernetes-validate==1.37.0`)") from None

    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [(tuple(exc.absolute_path), _message(exc))]
    except kubernetes_validate.SchemaNotFoundError as exc:
        return [((), exc.message)]
    return []


def _message(error) -> str:
    if error.validator == "additionalProperties":
        return f"{error.message} (not a field of this kind)"
    return error.message


def _line(path: tuple, text: str) -> str:
    return f"{format_path(path)}: {text}"


def kubectl_dry_run(folder: Path, *, timeout: float = 60) -> tuple[bool | None, str]:
    """`kubectl apply --dry-run=client -f folder`: (True, what it said), (False, its error), or
    (None, why it could not run). Client dry-run still asks the API server which kinds exist (and
    for its OpenAPI schema), so without a cluster it cannot run; with one it also needs the
    LeaderWorkerSet CRD installed there."""
    import shutil

    from bundle.errors import CommandTimedOut
    from bundle.run import run

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None, "skipped: no kubectl on PATH"
    try:
        done = run([kubectl, "apply", "--dry-run=client", "-f", str(folder)], timeout=timeout, check=False)
    except CommandTimedOut:
        return None, f"skipped: kubectl gave no answer in {timeout:.0f} s (no cluster reachable?)"
    text = (done.stdout + done.stderr).strip()
    if done.returncode == 0:
        return True, "kubectl apply --dry-run=client accepted every manifest"
    if any(s in text for s in ("connection refused", "failed to download openapi", "no such host", "i/o timeout")):
        return None, ("skipped: kubectl's client dry-run asks an API server for its kinds and schema, "
                      "and none is reachable from here")
    return False, text
