"""Every doctor check, in the order the table shows them."""

from __future__ import annotations

from dataclasses import replace

from bundle.doctor import checks_docker, checks_gpu, checks_host, checks_collectives, checks_model, checks_nixl, checks_ports
from bundle.doctor import checks_signature
from bundle.checks import selected
from bundle.doctor.core import Check, Report, run_check
from bundle.findings import Level

CHECKS: tuple[Check, ...] = (
    Check("driver", "NVIDIA driver (CUDA 13)", checks_gpu.driver),
    Check("gpus", "GPUs and compute capability", checks_gpu.gpus),
    Check("p2p", "GPU peer-to-peer topology", checks_gpu.p2p_topology),
    Check("nccl", "NCCL all-reduce, P2P on and off", checks_collectives.nccl_allreduce),
    Check("docker", "Docker and Compose", checks_docker.docker_versions),
    Check("nvidia-runtime", "NVIDIA container runtime", checks_docker.nvidia_runtime),
    Check("shm", "Shared memory (/dev/shm)", checks_host.shared_memory),
    Check("memlock", "Locked-memory limit", checks_host.memlock),
    Check("disk", "Free disk", checks_host.disk_space),
    Check("model", "Model files", checks_model.model_files),
    Check("ports", "Host ports", checks_ports.ports),
    Check("nixl", "NIXL transfer (UCX)", checks_nixl.nixl_transfer),
    Check("signature", "Image signature verification (cosign)", checks_signature.cosign_present),
)
NAMES = tuple(c.name for c in CHECKS)


def run_checks(ctx, only: list[str] | None = None, skip: list[str] | None = None,
               on_result=None, required: list[str] | None = None) -> Report:
    """`required`: checks that must run here; their SKIP (no GPU, no driver) is a FAIL with the same
    finding and fix (`make launch` on a host without NVIDIA GPUs stops there, before any build)."""
    results = []
    for check in selected(CHECKS, only, skip):
        result = run_check(check, ctx)
        if required and check.name in required and result.status is Level.SKIP:
            result.finding = replace(result.finding, level=Level.FAIL)
        if on_result is not None:
            on_result(check, result)
        results.append(result)
    return Report(results)
