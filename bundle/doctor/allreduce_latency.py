"""Small-message all-reduce latency measured on this host, kept where the bench reads it.

Doctor's `nccl` check probes each server's GPUs with P2P on and off (allreduce_probe.py) over decode's
message sizes, 8 KB to 1 MB; this module turns those runs into one record,
`runs/doctor/allreduce-latency.json`:

    {"measured_at": "2026-12-06T12:00:00+00:00", "host": "box",
     "groups": {"tp4": {"gpus": [0, 1, 2, 3],
                        "settings": {"nccl p2p": {"8192": 1.39e-05, ...},
                                     "nccl no p2p": {"8192": 1.52e-05, ...},
                                     "custom all-reduce": {"8192": 6.4e-06, ...}},
                        "custom_ar_off": null}}}

and gives the floor what it takes: `latency_for(record, gpus, pcie_safe)`, an `AllReduceLatency`
whose `seconds_by_bytes` is the mapping {message bytes: seconds} of the setting the servers run
(PCIe-safe: NCCL without P2P; else SGLang's custom all-reduce where it was on, NCCL with P2P for
the sizes it leaves to NCCL).
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from bundle.doctor.allreduce_runs import AllReduceRun
from bundle.paths import runs_dir

RECORD_NAME = "allreduce-latency.json"
NCCL_P2P, NCCL_NO_P2P, CUSTOM_AR = "nccl p2p", "nccl no p2p", "custom all-reduce"


@dataclass(frozen=True)
class AllReduceLatency:
    """One setting's small-message latency on a group of GPUs."""

    seconds_by_bytes: dict[int, float]
    gpus: int
    setting: str  # NCCL_P2P, NCCL_NO_P2P, CUSTOM_AR, or a mix: "custom all-reduce, nccl p2p above 512 KiB"
    measured_at: str = ""
    notes: list[str] = field(default_factory=list)

    def seconds(self, message_bytes: int) -> float:
        """The latency of a message of this size: the smallest measured size at or above it (a
        small all-reduce's time is flat in its size until bandwidth takes over, so rounding up
        never undercounts), the largest measured one scaled by size beyond the sweep."""
        sizes = sorted(self.seconds_by_bytes)
        for size in sizes:
            if size >= message_bytes:
                return self.seconds_by_bytes[size]
        return self.seconds_by_bytes[sizes[-1]] * message_bytes / sizes[-1]

    def describe(self) -> str:
        parts = ", ".join(f"{_size(b)} {s * 1e6:.1f} us" for b, s in sorted(self.seconds_by_bytes.items()))
        return f"{self.setting} on {self.gpus} GPUs: {parts}"


def _size(n: int) -> str:
    return f"{n // (1 << 20)} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n // 1024} KiB"


def record_of(runs: dict[str, dict[str, AllReduceRun]], *, now: datetime | None = None) -> dict:
    """Probe runs per group ({"on": run, "off": run}) -> the record (pure)."""
    groups = {}
    for name, pair in runs.items():
        settings, custom_off = {}, None
        on, off = pair.get("on"), pair.get("off")
        if on is not None and on.ok and on.latency_s:
            settings[NCCL_P2P] = {str(k): v for k, v in on.latency_s.items()}
        if off is not None and off.ok and off.latency_s:
            settings[NCCL_NO_P2P] = {str(k): v for k, v in off.latency_s.items()}
        if on is not None and on.custom_ar:
            if on.custom_ar.get("on") and on.custom_ar.get("latency_s"):
                settings[CUSTOM_AR] = {str(k): v for k, v in on.custom_ar["latency_s"].items()}
            else:
                custom_off = on.custom_ar.get("reason")
        gpus = (on or off).gpus if (on or off) is not None else ()
        groups[name] = {"gpus": list(gpus), "settings": settings, "custom_ar_off": custom_off}
    return {"measured_at": (now or datetime.now(timezone.utc)).isoformat(timespec="seconds"),
            "host": socket.gethostname(), "groups": groups}


def record_path() -> Path:
    return runs_dir() / "doctor" / RECORD_NAME


def write(record: dict, path: Path | None = None) -> Path:
    path = path or record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def load(path: Path | None = None) -> dict | None:
    """The last record doctor wrote on this host, or None (never probed, or unreadable: the floor
    then takes a cited figure and says so)."""
    path = path or record_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("groups"), dict) else None


def latency_for(record: dict, gpus: int, pcie_safe: bool) -> AllReduceLatency | None:
    """The latency the servers of a `gpus`-wide group would see, from a record: the first measured
    group of that width. None when no group of that width was measured in that setting."""
    for group in record.get("groups", {}).values():
        if len(group.get("gpus", ())) != gpus:
            continue
        settings = {name: {int(k): float(v) for k, v in sweep.items()}
                    for name, sweep in group.get("settings", {}).items()}
        at = record.get("measured_at", "")
        if pcie_safe:
            if NCCL_NO_P2P in settings:
                return AllReduceLatency(settings[NCCL_NO_P2P], gpus, NCCL_NO_P2P, at)
            continue
        if NCCL_P2P not in settings:
            continue
        notes = [f"custom all-reduce off: {group['custom_ar_off']}"] if group.get("custom_ar_off") else []
        custom = settings.get(CUSTOM_AR)
        if not custom:
            return AllReduceLatency(settings[NCCL_P2P], gpus, NCCL_P2P, at, notes)
        # SGLang sends a message to its custom kernel up to the kernel's buffer, to NCCL above it
        merged = {size: custom.get(size, seconds) for size, seconds in settings[NCCL_P2P].items()}
        beyond = [s for s in settings[NCCL_P2P] if s not in custom]
        setting = CUSTOM_AR + (f", {NCCL_P2P} from {_size(min(beyond))}" if beyond else "")
        return AllReduceLatency(merged, gpus, setting, at, notes)
    return None
