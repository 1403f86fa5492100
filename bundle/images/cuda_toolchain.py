"""The one CUDA toolchain of the image: docker/lock.toml [cuda] as PyPI wheels.

Every component comes from one release line (`[cuda] line`, 13.0: what the driver floor >= 580 runs).
The base layer installs these wheels and links them as /usr/local/cuda (docker/cuda-home.sh); the
framework layer's inputs repeat them, so a dependency that asks for an unpinned newer one
(humming-kernels[cu13]) resolves to these; the audit compares what the image holds with them.
"""

from __future__ import annotations

from bundle.lock import Lock

# [cuda] key -> the wheels of that component (one version each).
WHEELS: dict[str, tuple[str, ...]] = {
    "nvcc": ("nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm"),
    "cccl": ("nvidia-cuda-cccl",),
    "runtime": ("nvidia-cuda-runtime",),
    "nvrtc": ("nvidia-cuda-nvrtc",),
    "nvjitlink": ("nvidia-nvjitlink",),
}


def wheel_pins(lock: Lock) -> dict[str, str]:
    """PyPI name -> version of every toolchain wheel the lock pins."""
    cuda = lock.data["cuda"]
    return {wheel: cuda[key] for key, wheels in WHEELS.items() for wheel in wheels}


def line_of(version: str) -> str:
    """'13.0.88' -> '13.0': the release line a component version belongs to."""
    return ".".join(version.split(".")[:2])
