"""Pod templates: what compose's service settings are on Kubernetes.

compose -> pod: `deploy.resources` GPUs -> a GPU resource request (tp_size / nodes per pod);
`ipc: host` + a large /dev/shm -> an in-memory emptyDir at /dev/shm (and hostIPC only where asked);
`ulimits.memlock: -1` -> the IPC_LOCK capability (Kubernetes has no ulimits; IPC_LOCK lets NIXL/UCX
and NCCL pin host memory whatever RLIMIT_MEMLOCK is); the model bind mount -> a read-only hostPath
or PVC at /model; the JIT cache volume -> a volume named from the lock's hash at /var/cache/sglang;
the healthcheck -> readiness and startup probes on the same path and timings; the API key secret ->
a Secret mounted where the entrypoint reads it; `environment:` and `env_file:` -> env.
"""

from __future__ import annotations

import math
from pathlib import Path


from bundle.config.model import Deployment
from bundle.targets.k8s import config as k8s_config
from bundle.durations import parse_duration

MODEL_MOUNT = "/model"
JIT_CACHE_MOUNT = "/var/cache/sglang"
API_KEY_MOUNT = "/run/secrets/api_key"  # what docker/entrypoint.sh reads
API_KEY_SECRET_KEY = "api-key"
ENTRYPOINT = ["bundle-entrypoint"]  # the compose files' entrypoint: hands the key over at exec time


def seconds(text: str) -> int:
    return max(1, math.ceil(parse_duration(text)))


def env_list(env: dict[str, str]) -> list[dict]:
    return [{"name": name, "value": value} for name, value in env.items()]


def probe(path: str, port: int, *, period: int, timeout: int, failures: int) -> dict:
    return {"httpGet": {"path": path, "port": port}, "periodSeconds": period, "timeoutSeconds": timeout,
            "failureThreshold": failures}


def server_probes(dep: Deployment, path: str) -> dict:
    """compose's server healthcheck: readiness with its interval, timeout and retries; a startup
    probe that allows start_period for weight loading and CUDA graph capture. No liveness probe:
    compose restarts on exits, not on an unhealthy check, and /health is a generation that can
    queue behind a full batch; a crash ends the process and LWS recreates the group."""
    h, port = dep.health, dep.network.worker_port
    interval, timeout = seconds(h.interval), seconds(h.timeout)
    return {
        "startupProbe": probe(path, port, period=interval, timeout=timeout,
                              failures=math.ceil(seconds(h.start_period) / interval) + h.retries),
        "readinessProbe": probe(path, port, period=interval, timeout=timeout, failures=h.retries),
    }


def model_volume(dep: Deployment) -> dict:
    storage = k8s_config.of(dep).model_storage
    if storage.type == "pvc":
        return {"name": "model", "persistentVolumeClaim": {"claimName": storage.claim_name, "readOnly": True}}
    return {"name": "model", "hostPath": {"path": str(Path(storage.host_path).expanduser()), "type": "Directory"}}


def jit_cache_volume(dep: Deployment, cache_name: str) -> dict:
    cache = k8s_config.of(dep).jit_cache
    if cache.type == "pvc":
        return {"name": "jit-cache", "persistentVolumeClaim": {"claimName": cache_name}}
    if cache.type == "emptyDir":
        return {"name": "jit-cache", "emptyDir": {}}
    return {"name": "jit-cache", "hostPath": {"path": f"{cache.host_path_root.rstrip('/')}/{cache_name}",
                                              "type": "DirectoryOrCreate"}}


def api_key_volume(secret: str) -> dict:
    return {"name": "api-key", "secret": {"secretName": secret, "defaultMode": 0o400,
                                          "items": [{"key": API_KEY_SECRET_KEY, "path": "api_key"}]}}


def api_key_mount() -> dict:
    # subPath: a volume over all of /run/secrets could hide the service account token under
    # /var/run/secrets where /var/run links to /run.
    return {"name": "api-key", "mountPath": API_KEY_MOUNT, "subPath": "api_key", "readOnly": True}


def server_pod(dep: Deployment, *, labels: dict, annotations: dict, args: list[str], env: dict[str, str],
               image: str, gpus: int, ports: list[dict], probes: dict, api_key: bool, cache_name: str) -> dict:
    """One SGLang server pod template (a LeaderWorkerSet's leader or worker)."""
    k8s = k8s_config.of(dep)
    resources = {k8s.gpu_resource: gpus}
    if k8s.rdma.resource:
        resources[k8s.rdma.resource] = k8s.rdma.count
    mounts = [{"name": "model", "mountPath": MODEL_MOUNT, "readOnly": True},
              {"name": "jit-cache", "mountPath": JIT_CACHE_MOUNT},
              {"name": "dshm", "mountPath": "/dev/shm"}]
    volumes = [model_volume(dep), jit_cache_volume(dep, cache_name),
               {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": k8s.shm_size}}]
    if api_key:
        mounts.append(api_key_mount())
        volumes.append(api_key_volume(k8s.api_key_secret))
    container = {
        "name": "sglang",
        "image": image,
        "imagePullPolicy": k8s.image_pull_policy,
        "command": ENTRYPOINT,
        "args": args,
        "env": env_list(env),
        "ports": ports,
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
        "volumeMounts": mounts,
        **probes,
    }
    spec = {
        "containers": [container],
        "volumes": volumes,
        "terminationGracePeriodSeconds": seconds(dep.lifecycle.stop_grace_period),
        **({"hostIPC": True} if k8s.host_ipc else {}),
        **({"nodeSelector": dict(k8s.node_selector)} if k8s.node_selector else {}),
        **({"imagePullSecrets": [{"name": k8s.image_pull_secret}]} if k8s.image_pull_secret else {}),
    }
    return {"metadata": {"labels": labels, **({"annotations": annotations} if annotations else {})},
            "spec": spec}
