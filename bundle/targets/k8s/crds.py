"""The LeaderWorkerSet release's own CustomResourceDefinitions, as the API server would hold the
custom resources of a Kubernetes render to them, offline.

The CRDs under schemas/lws-v0.10.0/ are kubernetes-sigs/lws's `config/crd/bases/` at the release
tag, copied byte for byte (SOURCES below: the path in that repository, its git blob and the file's
sha256, which tests/test_k8s_crds.py holds). Their openAPIV3Schema is JSON Schema with Kubernetes'
extensions; two differences from the API server are closed here: the API server prunes (or, with
kubectl's default strict field validation, refuses) a field a structural schema does not name, so
every object schema that names its fields is made closed (additionalProperties: false) unless it
preserves unknown fields; and the CEL rules (x-kubernetes-validations) are not JSON Schema, so
lws_webhook.py states the one they hold together with the webhooks' rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

LWS_RELEASE = "v0.10.0"
LWS_COMMIT = "2161f38ff333f9e24d3c44adef7cd5d9787cac00"  # the tag's commit, 2026-08-11
CRD_DIR = Path(__file__).resolve().parent / "schemas" / f"lws-{LWS_RELEASE}"


@dataclass(frozen=True)
class CrdSource:
    file: str  # under CRD_DIR, the same name as in the repository
    blob: str  # git blob of config/crd/bases/<file> at LWS_COMMIT
    sha256: str

    @property
    def source_path(self) -> str:
        return f"config/crd/bases/{self.file}"

    @property
    def path(self) -> Path:
        return CRD_DIR / self.file


SOURCES = {
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): CrdSource(
        "leaderworkerset.x-k8s.io_leaderworkersets.yaml", "2b376d69063e46bec99d0d815d36948cdc87d128",
        "c5dcad8ed943e495490241f00b9a1b45d51203b6d484020db3636d5bf553568e"),
    ("disaggregatedset.x-k8s.io/v1", "DisaggregatedSet"): CrdSource(
        "disaggregatedset.x-k8s.io_disaggregatedsets.yaml", "5428521404e2cd20cb7dcb1b4743e8f097f725d0",
        "6dc06e630cc88c28ba5406dc4a15ac593f4ec1af89ef439e1bdb770d4a7e74a8"),
    ("disaggregatedset.x-k8s.io/v1", "DisaggregatedSetRoleScaler"): CrdSource(
        "disaggregatedset.x-k8s.io_disaggregatedsetrolescalers.yaml", "36d3357fa8b385c7f9393b2e3aad73cd67b4022e",
        "3650e4cd42d12e14569ec8042d0c797c803e05eff9a3959b3406184d39cfef9f"),
}


def kinds() -> tuple[tuple[str, str], ...]:
    return tuple(SOURCES)


@lru_cache(maxsize=None)
def schema(api_version: str, kind: str) -> dict:
    """The served version's openAPIV3Schema of (api_version, kind), closed as the API server's
    strict field validation is."""
    import yaml

    source = SOURCES[(api_version, kind)]
    # libyaml: the CRDs are 1.3 and 1.5 MB; the pure-Python loader takes seconds over them.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load(source.path.read_text(), Loader=loader)
    version = api_version.split("/", 1)[1]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v.get("served")]
    return _closed(served["schema"]["openAPIV3Schema"])


def _closed(node):
    if isinstance(node, list):
        return [_closed(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _closed(value) for key, value in node.items()}
    if "properties" in out and "additionalProperties" not in out \
            and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out
