"""Parsers for nvidia-smi's two machine-read outputs, and the calls that produce them.

- `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`: one line per GPU, values joined by
  ", " in the order of the fields asked for; a value the driver cannot give reads "[N/A]" or
  "[Not Supported]".
- `nvidia-smi topo -m`: a tab-separated matrix; the header names the columns (GPU0.., NIC0..,
  then "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"), each row starts with its device name and
  holds one link code per column (X, NV#, PIX, PXB, PHB, NODE, SYS), followed by a Legend.

nvidia-smi's text is not guaranteed stable across drivers: the parsers read columns by their header
names, tolerate extra columns, and fail with a ValueError naming the line they could not read.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass

from bundle.errors import CommandTimedOut
from bundle.run import run

# Asked for in this order; `parse_gpu_query` maps values back by position.
GPU_QUERY_FIELDS = ("index", "name", "uuid", "pci.bus_id", "driver_version", "compute_cap", "memory.total")

# What each link code in `topo -m` means (nvidia-smi's own legend, abridged).
LINK_MEANINGS = {
    "X": "self",
    "NV": "NVLink (a bonded set of # links)",
    "PIX": "PCIe, at most one PCIe bridge",
    "PXB": "PCIe, several PCIe bridges, no host bridge",
    "PHB": "PCIe through a PCIe host bridge (the CPU)",
    "NODE": "PCIe and the interconnect between host bridges within one NUMA node",
    "SYS": "PCIe and the SMP interconnect between NUMA nodes (QPI/UPI)",
}
_NOT_AVAILABLE = {"[N/A]", "[Not Supported]", "N/A", ""}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class NvidiaSmiUnavailable(RuntimeError):
    """nvidia-smi is not installed (`installed` False) or cannot talk to a driver (True)."""

    def __init__(self, message: str, *, installed: bool):
        super().__init__(message)
        self.installed = installed


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    uuid: str | None
    pci_bus_id: str | None
    driver_version: str | None
    compute_cap: tuple[int, int] | None  # (12, 0) for sm_120
    memory_total_mib: int | None

    @property
    def compute_cap_text(self) -> str:
        return f"{self.compute_cap[0]}.{self.compute_cap[1]}" if self.compute_cap else "unknown"


def driver_major(version: str | None) -> int | None:
    """580 from '580.95.05'; None when the driver did not report one."""
    if not version:
        return None
    match = re.match(r"^(\d+)", version.strip())
    return int(match.group(1)) if match else None


def parse_gpu_query(text: str, fields: tuple[str, ...] = GPU_QUERY_FIELDS) -> list[GpuInfo]:
    """Parse `--format=csv,noheader,nounits` output of a query for `fields` (which must include index).

    A header line (output without `noheader`) is recognised and skipped, and units such as " MiB"
    (output without `nounits`) are stripped, so either form of the documented CSV reads the same.
    """
    gpus = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        values = [v.strip() for v in line.split(", ")]
        if values and values[0] == fields[0]:
            continue  # a header: "index, name, ..."
        if len(values) != len(fields):
            raise ValueError(f"nvidia-smi query line {lineno}: expected {len(fields)} values "
                             f"({', '.join(fields)}), got {len(values)}: {line!r}")
        row = {f: (None if v in _NOT_AVAILABLE else v) for f, v in zip(fields, values)}
        gpus.append(GpuInfo(
            index=_int(row.get("index"), "index", lineno),
            name=row.get("name") or "unknown",
            uuid=row.get("uuid"),
            pci_bus_id=row.get("pci.bus_id"),
            driver_version=row.get("driver_version"),
            compute_cap=_compute_cap(row.get("compute_cap"), lineno),
            memory_total_mib=_mib(row.get("memory.total"), lineno),
        ))
    return gpus


def _int(value: str | None, what: str, lineno: int) -> int:
    try:
        return int(value or "")
    except ValueError:
        raise ValueError(f"nvidia-smi query line {lineno}: {what} is not a number: {value!r}") from None


def _compute_cap(value: str | None, lineno: int) -> tuple[int, int] | None:
    if value is None:
        return None
    match = re.fullmatch(r"(\d+)\.(\d+)", value)
    if not match:
        raise ValueError(f"nvidia-smi query line {lineno}: compute_cap is not MAJOR.MINOR: {value!r}")
    return int(match.group(1)), int(match.group(2))


def _mib(value: str | None, lineno: int) -> int | None:
    if value is None:
        return None
    return _int(value.removesuffix("MiB").strip(), "memory.total", lineno)


@dataclass(frozen=True)
class Topology:
    """The GPU-to-GPU part of `nvidia-smi topo -m`, plus each GPU's CPU and NUMA affinity."""

    gpus: tuple[int, ...]
    links: dict[tuple[int, int], str]  # (a, b) -> "NV18", "PIX", "SYS", ... for a != b
    cpu_affinity: dict[int, str]
    numa_affinity: dict[int, str]

    def link(self, a: int, b: int) -> str:
        return self.links[(a, b)]

    def pairs(self, gpus: tuple[int, ...] | list[int] | None = None) -> list[tuple[int, int, str]]:
        chosen = [g for g in (gpus if gpus is not None else self.gpus) if g in self.gpus]
        return [(a, b, self.links[(a, b)]) for i, a in enumerate(chosen) for b in chosen[i + 1:]]

    def nvlink_pairs(self, gpus=None) -> list[tuple[int, int, str]]:
        return [p for p in self.pairs(gpus) if is_nvlink(p[2])]

    def pcie_only(self, gpus=None) -> bool:
        """True when no pair among `gpus` (default: all) is joined by NVLink."""
        return not self.nvlink_pairs(gpus)


def is_nvlink(code: str) -> bool:
    return re.fullmatch(r"NV\d+", code) is not None


def parse_topology(text: str) -> Topology:
    """Parse `nvidia-smi topo -m`. Raises ValueError when no GPU matrix is found."""
    lines = [_ANSI.sub("", ln).rstrip("\n") for ln in text.splitlines()]
    # The header's first cell (above the row names) is empty: "\tGPU0\tGPU1\t...\tCPU Affinity".
    header_at = next((i for i, ln in enumerate(lines)
                      if "\t" in ln and ln.split("\t")[0].strip() == ""
                      and "GPU0" in (c.strip() for c in ln.split("\t"))), None)
    if header_at is None:
        raise ValueError("nvidia-smi topo -m: no header line with GPU0 found")
    columns = [c.strip() for c in lines[header_at].split("\t")]
    # The header starts with an empty cell above the row names.
    if columns and columns[0] == "":
        columns = columns[1:]
    gpu_cols = {name: pos for pos, name in enumerate(columns) if re.fullmatch(r"GPU\d+", name)}
    cpu_col = columns.index("CPU Affinity") if "CPU Affinity" in columns else None
    numa_col = columns.index("NUMA Affinity") if "NUMA Affinity" in columns else None

    links: dict[tuple[int, int], str] = {}
    cpu_affinity: dict[int, str] = {}
    numa_affinity: dict[int, str] = {}
    gpus: list[int] = []
    for ln in lines[header_at + 1:]:
        if not ln.strip() or ln.strip().startswith("Legend"):
            if gpus:
                break
            continue
        cells = [c.strip() for c in ln.split("\t")]
        row_name, values = cells[0], cells[1:]
        match = re.fullmatch(r"GPU(\d+)", row_name)
        if not match:
            continue  # NIC rows and the like
        a = int(match.group(1))
        gpus.append(a)
        for name, pos in gpu_cols.items():
            if pos >= len(values):
                raise ValueError(f"nvidia-smi topo -m: row {row_name} has no value for column {name}: {ln!r}")
            b = int(name[3:])
            if a != b:
                links[(a, b)] = values[pos]
        if cpu_col is not None and cpu_col < len(values):
            cpu_affinity[a] = values[cpu_col]
        if numa_col is not None and numa_col < len(values):
            numa_affinity[a] = values[numa_col]
    if not gpus:
        raise ValueError("nvidia-smi topo -m: the header names GPUs but no GPU row follows")
    return Topology(gpus=tuple(gpus), links=links, cpu_affinity=cpu_affinity, numa_affinity=numa_affinity)


def _run(args: list[str], timeout: float = 30) -> str:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise NvidiaSmiUnavailable("nvidia-smi is not on PATH (no NVIDIA driver installed on this host)",
                                   installed=False)
    try:
        proc = run([exe, *args], timeout=timeout, check=False)
    except CommandTimedOut:
        raise NvidiaSmiUnavailable(f"nvidia-smi {' '.join(args)} did not answer in {timeout:.0f} s "
                                   "(a hung driver or GPU)", installed=True) from None
    if proc.returncode != 0:
        detail = (proc.stdout + proc.stderr).strip().splitlines()
        raise NvidiaSmiUnavailable(f"nvidia-smi {' '.join(args)} exited {proc.returncode}: "
                                   f"{detail[0] if detail else '(no output)'}", installed=True)
    return proc.stdout


def query_gpus() -> list[GpuInfo]:
    text = _run([f"--query-gpu={','.join(GPU_QUERY_FIELDS)}", "--format=csv,noheader,nounits"])
    return parse_gpu_query(text)


def query_topology() -> Topology:
    return parse_topology(_run(["topo", "-m"]))


def query_fields(fields: tuple[str, ...]) -> str:
    """`--query-gpu` for any fields, csv without header or units (one line per GPU, in field order)."""
    return _run([f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"])
