"""A profile's per-family table (profile_trace.py) set against each family's share of the level's floor
(cost_model.FloorParts.families: the weight classes' bytes by the family that reads them, the caches to
attention, the collectives' latency, the launches without CUDA graphs), and the verdict's evidence made from
it (verdict.ProfileEvidence).

Only a decode step of GPU kernels is set against the floor: the floor is a decode step's on a GPU. A CPU
trace (the CPU engine: CPU ops' self time) or a CPU figure (the host's memory bandwidth) is named as
not comparable, and a prefill server's table (its EXTEND steps) as not a decode step's.

A family with more than half its time in Triton's or in PyTorch's own kernels, where SGLang's path on sm_120 runs a
prebuilt one (the MoE: FlashInfer's MXFP4 module; attention: FlashInfer's sparse MLA and TileLang's
indexer), is named a fallback: the seeds' cause, read from the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from bundle.verify import kernel_families as kf
from bundle.verify import verdict
from bundle.verify.profile_trace import StepProfile

DECODE = "DECODE"
# The families where SGLang's sm_120 path is a prebuilt library, and the libraries that mean a fallback there.
PREBUILT_FAMILIES = (kf.MOE, kf.ATTENTION)
FALLBACK_LIBRARIES = ("Triton", "PyTorch")
# Why a family has no share of the floor.
NOT_IN_FLOOR = {
    kf.SAMPLING: "not in this floor (a record from before the sampler's read was counted)",
    kf.OTHER: "not in the floor (kernels of no known family)",
    kf.IDLE: "not in the floor (with CUDA graphs on it has no launch part: host work, launch gaps and a "
             "collective's wait are all gap)",
}


@dataclass(frozen=True)
class Row:
    """One family of a profile beside its share of the floor."""

    family: str
    ms_per_step: float
    floor_ms: float | None  # None: the floor has no part for it (NOT_IN_FLOOR says why)
    kernels: tuple[str, ...] = ()  # "name (library)", the family's largest first
    fallback: bool = False

    def line(self) -> str:
        head = f"    {self.family:<22} {self.ms_per_step:>8.3f} ms a step"
        if self.floor_ms is None:
            return f"{head}, {NOT_IN_FLOOR.get(self.family, 'not in the floor')}"
        ratio = f" ({self.ms_per_step / self.floor_ms:.1f}x)" if self.floor_ms > 0 else ""
        none = " (none in the trace)" if not self.ms_per_step else ""
        return (f"{head}{none}, floor's share {self.floor_ms:.3g} ms{ratio}"
                + (f"; a fallback: {self.fallback_kernel()}" if self.fallback and self.kernels else ""))

    def fallback_kernel(self) -> str:
        """The family's largest kernel from a fallback library (its largest kernel if none is named)."""
        return next((k for k in self.kernels if k.endswith(tuple(f"({lib})" for lib in FALLBACK_LIBRARIES))),
                    self.kernels[0])


def fallback(family: str, libraries: dict[str, float]) -> bool:
    """A prebuilt family with more than half its time in Triton's or PyTorch's own kernels (a majority:
    PyTorch's elementwise glue around a prebuilt MoE stays under it)."""
    total = sum(libraries.values())
    if family not in PREBUILT_FAMILIES or not total:
        return False
    return max(sum(ms for lib, ms in libraries.items() if lib == fb) for fb in FALLBACK_LIBRARIES) > total / 2


def rows(profile: StepProfile, floor: dict[str, float]) -> list[Row]:
    """Every family of the profile and every family the floor has a share for, the idle gaps last."""
    out = []
    for f in profile.families:
        share = floor.get(f.family, None if f.family in NOT_IN_FLOOR else 0.0)
        out.append(Row(f.family, f.ms_per_step, share, tuple(f"{name} ({lib})" for name, lib, _ in f.top),
                       fallback(f.family, f.libraries)))
    seen = {f.family for f in profile.families}
    out += [Row(family, 0.0, ms) for family, ms in floor.items() if family not in seen and family != kf.IDLE]
    out.append(Row(kf.IDLE, profile.idle_ms, floor.get(kf.IDLE)))
    return out


def not_comparable(profile: StepProfile, limit: dict | None) -> str | None:
    """Why this table is not set against the level's floor, or None when it is."""
    if limit is None:
        return "the level has no floor (it was not scored)"
    if profile.stage != DECODE:
        return f"the floor is a decode step's; this table is of {profile.stage} steps"
    if profile.activities != "GPU":
        return "CPU ops' self time on the host, not GPU kernels: no ratio to a floor of memory reads"
    if limit.get("figure") != "gpu":
        return "GPU kernels against a CPU figure (the host's memory bandwidth)"
    return None


def lines(profile: StepProfile, limit: dict | None, label: str) -> list[str]:
    """The comparison under a profile's table: a line per family, or why there is none."""
    parts = (limit or {}).get("parts") or {}
    why = not_comparable(profile, limit if parts else None)
    if why:
        floor = f"; the floor of {label}: {parts['line']}" if parts.get("line") else ""
        return [f"  against the floor: not comparable: {why}{floor}"]
    out = [f"  against the floor of {label}, per step ({parts['line']}):"]
    out += [row.line() for row in rows(profile, parts.get("families") or {})]
    return out


def evidence(profiles: list[StepProfile], limit: dict | None, label: str) -> verdict.ProfileEvidence | None:
    """The verdict's evidence from a level's decode-step GPU tables (each TP rank's, each replica's: their
    mean per family); None where no table is comparable with the level's floor."""
    usable = [p for p in profiles if not_comparable(p, limit) is None]
    if not usable:
        return None
    floor = ((limit or {}).get("parts") or {}).get("families") or {}
    by_family: dict[str, list[Row]] = {}
    for profile in usable:
        for row in rows(profile, floor):
            by_family.setdefault(row.family, []).append(row)
    families = []
    for family, found in by_family.items():
        kernels = tuple(dict.fromkeys(k for row in found for k in row.kernels))
        families.append(verdict.FamilyTime(family, sum(r.ms_per_step for r in found) / len(usable),
                                           found[0].floor_ms, kernels, any(r.fallback for r in found)))
    steps = min(p.steps for p in usable)
    return verdict.ProfileEvidence(tuple(families), f"the profile of {label} ({len(usable)} trace"
                                   f"{'s' if len(usable) > 1 else ''}, {steps} steps each)", steps)
