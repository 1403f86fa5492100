"""Whether a native library can run on compute capability 12.0 (RTX PRO 6000 Blackwell), from the
cubin and PTX targets cuobjdump lists in it.

CUDA's rules: a cubin for sm_XY runs on devices of the same major version with minor >= Y; an
`a` variant (sm_120a) runs only on that exact capability; an `f` variant (sm_100f) on its family
(the same major, minor >= Y). PTX is compiled by the driver for the device it meets, forward to any
newer capability, unless it is arch-specific (`a`) or family-specific (`f`, then only its family).
"""

from __future__ import annotations

import re

TARGET = (12, 0)
_ARCH = re.compile(r"^(?:sm|compute)_(\d+?)(\d)([af]?)$")


def parse(arch: str) -> tuple[int, int, str] | None:
    """'sm_120a' -> (12, 0, 'a'); None for anything else."""
    m = _ARCH.match(arch)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


def _runs(arch: str, target: tuple[int, int], *, ptx: bool) -> bool:
    p = parse(arch)
    if p is None:
        return False
    major, minor, suffix = p
    if suffix == "a":  # arch-specific: that exact arch only
        return (major, minor) == target
    if suffix == "f" or not ptx:  # a family build, or a plain cubin: the same major, this minor or lower
        return major == target[0] and minor <= target[1]
    return (major, minor) <= target  # plain PTX is JIT-compiled forward to any later arch


def cubin_runs(arch: str, target: tuple[int, int] = TARGET) -> bool:
    return _runs(arch, target, ptx=False)


def ptx_runs(arch: str, target: tuple[int, int] = TARGET) -> bool:
    return _runs(arch, target, ptx=True)


def coverage(cubins: list[str], ptx: list[str], target: tuple[int, int] = TARGET) -> dict:
    """{'runs_on_sm120': bool, 'how': 'cubin sm_120a' | 'PTX sm_90 (JIT)' | None}."""
    for arch in cubins:
        if cubin_runs(arch, target):
            return {"runs_on_sm120": True, "how": f"cubin {arch}"}
    for arch in ptx:
        if ptx_runs(arch, target):
            return {"runs_on_sm120": True, "how": f"PTX {arch} (compiled by the driver at first use)"}
    return {"runs_on_sm120": False, "how": None}
