"""Rendered Kubernetes manifests checked offline, before anything is written.

Built-in kinds go through kubernetes-validate (strict: an unknown field fails) against the schemas
of KUBERNETES_VERSION. kubernetes-validate only warns on custom resources, so a LeaderWorkerSet is
held to this project's schema of the LWS API (schemas/leaderworkerset-v1.schema.json, written from
the LWS Go types), and each of its pod templates goes through kubernetes-validate as a core/v1
PodTemplate. Every problem is collected, one line each, naming the manifest and the field path.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from bundle.config.source import format_path

# The oldest Kubernetes the manifests are checked against; LeaderWorkerSet itself needs 1.26+.
KUBERNETES_VERSION = "1.30"
LWS_SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "leaderworkerset-v1.schema.json"
LWS_API = "leaderworkerset.x-k8s.io/v1"
# The Prometheus Operator's kinds (monitoring.coreos.com/v1), held to schemas of the fields written.
OPERATOR_SCHEMAS = {("monitoring.coreos.com/v1", kind): Path(__file__).resolve().parent / "schemas" / file
                    for kind, file in (("PodMonitor", "podmonitor-v1.schema.json"),
                                       ("PrometheusRule", "prometheusrule-v1.schema.json"))}


@lru_cache(maxsize=1)
def lws_schema() -> dict:
    return json.loads(LWS_SCHEMA_PATH.read_text())


def problems(objects, names) -> list[str]:
    """Every schema problem of `objects` (written as `names`), one line each: 'file: path: what'."""
    out = []
    for name, obj in zip(names, objects):
        if obj.get("apiVersion") == LWS_API and obj.get("kind") == "LeaderWorkerSet":
            out += [f"{name}: {line}" for line in lws_problems(obj)]
        elif (obj.get("apiVersion"), obj.get("kind")) in OPERATOR_SCHEMAS:
            schema = json.loads(OPERATOR_SCHEMAS[(obj["apiVersion"], obj["kind"])].read_text())
            out += [f"{name}: {line}" for line in schema_problems(obj, schema)]
        else:
            out += [f"{name}: {line}" for line in builtin_problems(obj)]
    return out


def schema_problems(obj: dict, schema: dict) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    return [_line(tuple(e.absolute_path), _message(e)) for e in
            sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))]


def lws_problems(obj: dict) -> list[str]:
    out = schema_problems(obj, lws_schema())
    template = obj.get("spec", {}).get("leaderWorkerTemplate", {})
    for key in ("leaderTemplate", "workerTemplate"):
        if isinstance(template.get(key), dict):
            wrapped = {"apiVersion": "v1", "kind": "PodTemplate",
                       "metadata": {"name": obj.get("metadata", {}).get("name", "lws")},
                       "template": template[key]}
            prefix = ("spec", "leaderWorkerTemplate", key)
            out += [_line(prefix + path[1:], text) for path, text in _kubernetes_validate(wrapped)]
    return out


def builtin_problems(obj: dict) -> list[str]:
    return [_line(path, text) for path, text in _kubernetes_validate(obj)]


def _kubernetes_validate(obj: dict) -> list[tuple[tuple, str]]:
    try:
        import kubernetes_validate  # the `k8s` extra: 108 MB of schemas a GPU host's driver does not need
    except ImportError:
        from bundle.errors import EXIT_ENVIRONMENT, BundleError

        raise BundleError("checking Kubernetes manifests needs the package kubernetes-validate (the driver's "
                          "`k8s` extra), which is not installed",
                          hint="`make install`, or `pip install -e '.[k8s]'` (pipx: `pipx inject "
                               "sglang-sm120-bundle kubernetes-validate==1.37.0`)",
                          exit_code=EXIT_ENVIRONMENT) from None

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
    import subprocess

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None, "skipped: no kubectl on PATH"
    try:
        done = subprocess.run([kubectl, "apply", "--dry-run=client", "-f", str(folder)], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"skipped: kubectl gave no answer in {timeout:.0f} s (no cluster reachable?)"
    text = (done.stdout + done.stderr).strip()
    if done.returncode == 0:
        return True, "kubectl apply --dry-run=client accepted every manifest"
    if any(s in text for s in ("connection refused", "failed to download openapi", "no such host", "i/o timeout")):
        return None, ("skipped: kubectl's client dry-run asks an API server for its kinds and schema, "
                      "and none is reachable from here")
    return False, text
