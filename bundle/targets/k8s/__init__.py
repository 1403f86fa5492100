"""The Kubernetes wing: everything `--target k8s` is, in one folder. The same topologies, config and
command lines as compose, as LeaderWorkerSet + smg manifests, pd as one DisaggregatedSet (`bundle render
--target k8s`), checked against the Kubernetes, LeaderWorkerSet and Prometheus Operator schemas it ships.

commands.py       the compose command lines, changed only where pods need it
pods.py           pod templates (GPUs, /dev/shm, memlock, volumes, probes, the API key)
disaggregated.py  a disaggregated topology as one DisaggregatedSet: roles, labels, the router's revision
monitoring.py     the PodMonitors, PrometheusRule and dashboards of one topology
manifests.py      the objects of one topology, and writing them
rules.py          the settings only Kubernetes reads, and the manifests held to their schemas
validation.py     kubernetes-validate, the CRDs' OpenAPI schemas, `kubectl apply --dry-run=client`
crds.py           the LeaderWorkerSet / DisaggregatedSet CRDs pinned under schemas/
lws_webhook.py    LeaderWorkerSet's admission webhook's defaults and checks, as the cluster applies them

TARGET is its one entry in bundle/targets/registry.py.
"""

from bundle.api import Target
from bundle.targets.k8s import manifests, rules, validation
from bundle.targets.k8s.manifests import K8sRendered, for_target, render

__all__ = ["TARGET", "K8sRendered", "for_target", "render"]

TARGET = Target("k8s", "one DisaggregatedSet (pd) or LeaderWorkerSets + smg manifests, checked against the Kubernetes "
                       "and LeaderWorkerSet schemas (one file per object in -o DIR)",
                renderer=manifests, rules=rules, dry_run=validation.kubectl_dry_run)
