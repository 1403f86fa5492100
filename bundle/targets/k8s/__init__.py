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

config.py    its section of bundle.yaml (`kubernetes:`), typed (the core keeps it untyped: Deployment.wing_section)
config.schema.json, defaults.yaml   that section's schema and defaults, which the config loader adds to the core's
target.py    TARGET, its entry in bundle/targets/registry.py

This file declares the section (SECTION, SCHEMA, DEFAULTS) and imports nothing: the config loader reads it
(through bundle/targets/sections.py) before any wing runs, and a package's own file is imported with any
of its modules, so it must stay this light.
"""

from pathlib import Path

SECTION = "kubernetes"  # its key in bundle.yaml
READ_BY = "`bundle render --target k8s`"  # who reads it, for messages and the reference
SCHEMA = Path(__file__).with_name("config.schema.json")  # the section's JSON Schema (its own $defs)
DEFAULTS = Path(__file__).with_name("defaults.yaml")  # `kubernetes:` and its defaults
