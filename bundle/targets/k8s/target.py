"""TARGET: the k8s wing's one entry in bundle/targets/registry.py."""

from __future__ import annotations

from bundle.api import Target
from bundle.targets.k8s import manifests, rules, validation

TARGET = Target("k8s", "one DisaggregatedSet (pd) or LeaderWorkerSets + smg manifests, checked against the Kubernetes "
                       "and LeaderWorkerSet schemas (one file per object in -o DIR)",
                renderer=manifests, rules=rules, dry_run=validation.kubectl_dry_run,
                dry_run_help="also run `kubectl apply --dry-run=client` on them (needs a kubectl whose context "
                             "reaches a cluster: client dry-run asks the API server what kinds exist)")
