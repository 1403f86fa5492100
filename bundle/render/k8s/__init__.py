"""The Kubernetes render target: the same topologies, config and command lines as compose, as
LeaderWorkerSet + smg manifests, pd as one DisaggregatedSet (`bundle render --target k8s`).

commands.py       the compose command lines, changed only where pods need it
pods.py           pod templates (GPUs, /dev/shm, memlock, volumes, probes, the API key)
disaggregated.py  a disaggregated topology as one DisaggregatedSet: roles, labels, the router's revision
manifests.py      the objects of one topology, and writing them
"""

from bundle.render.k8s.manifests import K8sRendered, render

# The k8s target's entry point (service/targets.py): (typed config, the compose render) -> manifests.
for_target = render

__all__ = ["K8sRendered", "for_target", "render"]
