"""What one small collective costs on a host: a table of message size -> seconds, measured (doctor's
collectives probe writes one) or cited (published measurements on RTX PRO 6000, by host class).

The floor of a decode step adds every collective the step makes at this latency: at C=1 a DeepSeek-V4
step makes 87 all-reduces of 8 KB and a logits gather, each bound by latency, not bandwidth, on PCIe.

The input is plain: `CollectiveLatency.measured({8192: 14e-6, 65536: 18e-6}, source="...")`, a mapping of
message bytes (per rank) to seconds for one all-reduce, from any probe. Between two sizes the time is
interpolated on a log-size scale; below the smallest it is the smallest's time (latency does not fall
with a smaller message); above the largest it grows at the bus bandwidth the last two points imply (or
the link's, when given).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

# local-inference-lab/rtx6kpro (optimization/pcie-oneshot-allreduce.md, hardware/*.md), NCCL all-reduce on
# RTX PRO 6000 Server Edition over PCIe (no NVLink); SGLang's custom all-reduce turns itself off for more
# than 2 PCIe-only GPUs, so TP4 and TP8 run NCCL (CONTEXT.md, sixth round).
CITED = {
    "pcie-4gpu-numa": ({4096: 13.2e-6, 8192: 13.9e-6, 16384: 14.7e-6, 32768: 15.6e-6},
                       "NCCL all-reduce, 4 RTX PRO 6000 on one NUMA node (local-inference-lab/rtx6kpro, "
                       "optimization/pcie-oneshot-allreduce.md)"),
    "pcie-8gpu-switches": ({4096: 24e-6, 65536: 24e-6},
                           "NCCL all-reduce, 8 RTX PRO 6000 behind PCIe switches, about 24 us flat to 64 KB "
                           "(local-inference-lab/rtx6kpro, hardware/)"),
    "pcie-cross-socket": ({4096: 57e-6, 8192: 57e-6},
                          "NCCL all-reduce across CPU sockets, about 57 us at 4-8 KB "
                          "(local-inference-lab/rtx6kpro, hardware/)"),
}


@dataclass(frozen=True)
class CollectiveLatency:
    """Seconds per collective by message size (bytes per rank); `source` says where the figures come from."""

    points: tuple[tuple[int, float], ...]  # (message bytes, seconds), sorted by size
    source: str
    measured_here: bool = False  # doctor's probe on this host (True) or a cited figure
    link_gb_s: float | None = None  # the bandwidth that takes over past the largest point
    notes: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def measured(cls, table: dict[int, float], *, source: str, link_gb_s: float | None = None) -> CollectiveLatency:
        """A probe's table {message bytes: seconds}: the form doctor's collectives probe writes."""
        points = tuple(sorted((int(k), float(v)) for k, v in table.items() if float(v) > 0))
        if not points:
            raise ValueError("a latency table needs at least one positive time")
        return cls(points, source, measured_here=True, link_gb_s=link_gb_s)

    @classmethod
    def cited(cls, host_class: str, *, link_gb_s: float | None = None) -> CollectiveLatency:
        table, source = CITED[host_class]
        return cls(tuple(sorted(table.items())), f"cited: {source}", link_gb_s=link_gb_s)

    def seconds(self, message_bytes: float) -> float:
        sizes = [s for s, _ in self.points]
        times = [t for _, t in self.points]
        if message_bytes <= sizes[0]:
            return times[0]
        if message_bytes >= sizes[-1]:
            if self.link_gb_s:
                rate = self.link_gb_s * 1e9
            elif len(sizes) > 1 and times[-1] > times[-2]:
                rate = (sizes[-1] - sizes[-2]) / (times[-1] - times[-2])
            else:
                return times[-1]
            return times[-1] + (message_bytes - sizes[-1]) / rate
        i = bisect.bisect_left(sizes, message_bytes)
        lo, hi = math.log(sizes[i - 1]), math.log(sizes[i])
        w = (math.log(message_bytes) - lo) / (hi - lo)
        return times[i - 1] + w * (times[i] - times[i - 1])


def host_class_for(ranks: int) -> str:
    """The cited host class a TP group of `ranks` GPUs most likely sits in, without a measurement: up to 4
    GPUs on one NUMA node (the 4-GPU figure is an upper bound for 2), 8 behind PCIe switches."""
    return "pcie-4gpu-numa" if ranks <= 4 else "pcie-8gpu-switches"


def for_group(ranks: int, measured: CollectiveLatency | None = None, *,
              link_gb_s: float | None = None) -> CollectiveLatency:
    """The latency a TP group of `ranks` GPUs pays: doctor's where it measured one, else the cited one."""
    return measured or CollectiveLatency.cited(host_class_for(ranks), link_gb_s=link_gb_s)


def from_collectives(collectives: dict | None) -> CollectiveLatency | None:
    """doctor's measured latency, where collectives.json carries one: a `latency` entry (top level or
    anywhere under `evidence`) of the form {"seconds_by_bytes": {"8192": 1.39e-05, ...}, "source": "...",
    "p2p": "on" | "off"}: the table measured with P2P as the servers run it (`pcie_safe`: off). This is
    the hook doctor's collectives probe fills; without it the floor takes the cited figure."""
    if not isinstance(collectives, dict):
        return None
    want = "off" if collectives.get("pcie_safe") else "on"
    found: list[dict] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            table = node.get("seconds_by_bytes")
            if isinstance(table, dict) and node.get("p2p", want) == want:
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(collectives.get("latency"))
    walk(collectives.get("evidence"))
    for node in found:
        try:
            return CollectiveLatency.measured({int(k): float(v) for k, v in node["seconds_by_bytes"].items()},
                                              source=str(node.get("source") or "doctor's collectives probe (measured)"))
        except (TypeError, ValueError):
            continue
    return None
