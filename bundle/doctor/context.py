"""What the checks look at: the deployment's needs (from bundle.yaml or flags) and host facts,
each fact gathered once and shared (nvidia-smi and `docker info` are slow)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from bundle.doctor import nvidia_smi

# Every topology's GPUs: tp4 uses 0-3, pd 0-7 (prefill 0-3, decode 4-7) by default.
REQUIRED_COMPUTE_CAP = (12, 0)
MIN_DRIVER_FOR_CUDA_13 = 580  # CUDA 13.0 needs an R580 driver or newer


@dataclass
class HostContext:
    model_path: str | None = None
    ports: list[tuple[str, int, str]] = field(default_factory=list)  # (host address, port, what uses it)
    image: str | None = None  # the worker image the NIXL check runs in, when present locally
    expected_lock_hash: str | None = None
    gpu_groups: dict[str, tuple[int, ...]] = field(default_factory=dict)  # "prefill" -> (0, 1, 2, 3)
    pcie_safe_collectives: bool | str | None = None  # the config's lever (true, false, "auto"); None: unknown
    nixl_gpus: tuple[int, int] = (0, 4)  # a prefill GPU and a decode GPU
    host_python_nixl: bool = True  # allow the DRAM fallback on this host's Python
    model_pin: object | None = None  # bundle.images.model.ModelPin of the lock; None: not pinned

    @property
    def gpus_needed(self) -> int:
        used = {g for group in self.gpu_groups.values() for g in group}
        return max(used) + 1 if used else 0

    @cached_property
    def gpus(self) -> list[nvidia_smi.GpuInfo]:
        """Raises NvidiaSmiUnavailable (cached too: asked once)."""
        return nvidia_smi.query_gpus()

    @cached_property
    def topology(self) -> nvidia_smi.Topology:
        return nvidia_smi.query_topology()

    @cached_property
    def engine(self):
        """bundle.docker.EngineInfo; raises BundleError when no engine answers."""
        from bundle.stack import engine

        return engine.engine_info()

    def gpu_error(self) -> nvidia_smi.NvidiaSmiUnavailable | None:
        """Why GPU facts are unavailable, or None when nvidia-smi answered."""
        try:
            _ = self.gpus
        except nvidia_smi.NvidiaSmiUnavailable as exc:
            return exc
        return None

    def gpu_problem(self) -> str | None:
        error = self.gpu_error()
        return str(error) if error else None
