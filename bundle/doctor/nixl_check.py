"""Run the NIXL probe (bundle/nixl_probe.py) where it means most, and read which UCX transport it used.

Where: inside the worker image on a GPU host (`docker run` with the GPUs, VRAM to VRAM, as prefill
and decode move the KV cache); else with this host's Python (DRAM to DRAM) when nixl_cu13 imports
here. The result says which of the two ran, so a DRAM pass on a laptop is never mistaken for proof
of the GPU path.

How the transport is known: UCX_PROTO_INFO=y makes UCX print, for each endpoint configuration, a
table of the protocol it selected per operation and size range, e.g.

    | bundle-probe-initiator intra-node cfg#1                              |
    | remote memory write by ucp_put*(multi) from cuda/GPU0 to cuda/dev[3] |
    | 0..inf | zero-copy   | cuda_ipc/cuda                                 |

A NIXL WRITE is a UCP put, so the initiator's "remote memory write" table for the probe's memory
type, at the probe's size, names the transport/device pair (cma/memory, cuda_ipc/cuda0, tcp/lo...).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bundle.doctor.nixl_probe import RESULT_PREFIX
from bundle.errors import CommandFailed, CommandTimedOut
from bundle.run import run

PROBE_PATH = Path(__file__).resolve().with_name("nixl_probe.py")
PROBE_IN_CONTAINER = "/opt/bundle-probe/nixl_probe.py"
INITIATOR_AGENT = "bundle-probe-initiator"

# Transports that move data without a network stack: what the KV path should use on one host.
SHARED_MEMORY_TRANSPORTS = {"cma", "sysv", "posix", "xpmem", "knem"}
GPU_DIRECT_TRANSPORTS = {"cuda_ipc"}
_TIMESTAMP_PREFIX = re.compile(r"^\[[0-9.]+\]\s+\[[^\]]*\]\s*")
_TITLE = re.compile(r"^(?P<ctx>\S+) (?P<scope>intra-node|inter-node|self|[a-z-]+) cfg#(?P<cfg>\d+)$")
_TRANSPORT_DEVICE = re.compile(r"([A-Za-z0-9_]+)/([A-Za-z0-9_:.\-]+)")


@dataclass(frozen=True)
class ProtoSelection:
    """One row of a UCX_PROTO_INFO table."""

    context: str
    scope: str  # intra-node, inter-node, self
    operation: str  # "remote memory write by ucp_put* from host memory to host"
    size_range: str
    description: str  # zero-copy, short, multi-frag copy-in, rendezvous ...
    config: str  # "cma/memory", "cuda_ipc/cuda0", "50% on rc_mlx5/mlx5_0:1 and 50% on ..."

    @property
    def transports(self) -> list[str]:
        return [m.group(1) for m in _TRANSPORT_DEVICE.finditer(self.config)]

    def covers(self, size: int) -> bool:
        low, _, high = self.size_range.partition("..")
        lo = _size(low)
        hi = _size(high) if high else lo
        return lo is not None and hi is not None and lo <= size <= hi


def _size(text: str) -> float | None:
    text = text.strip()
    if text == "inf":
        return float("inf")
    match = re.fullmatch(r"(\d+)([KMGT]?)B?", text)
    if not match:
        return None
    return int(match.group(1)) * 1024 ** " KMGT".index(match.group(2) or " ")


def parse_proto_info(output: str) -> list[ProtoSelection]:
    """Every selection row of every UCX_PROTO_INFO table in `output` (other lines are ignored)."""
    rows: list[ProtoSelection] = []
    title: re.Match | None = None
    operation: str | None = None
    for raw in output.splitlines():
        line = _TIMESTAMP_PREFIX.sub("", raw).strip()
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 1:
            match = _TITLE.match(cells[0])
            if match:
                title, operation = match, None
            elif title is not None and operation is None:
                operation = cells[0]
            continue
        if title is None or operation is None or cells[0] == "Range" or len(cells) < 3:
            continue
        rows.append(ProtoSelection(context=title["ctx"], scope=title["scope"], operation=operation,
                                   size_range=cells[0], description=cells[1],
                                   config=" | ".join(cells[2:])))
    return rows


def write_selection(rows: list[ProtoSelection], mem: str, size: int,
                    context: str = INITIATOR_AGENT) -> ProtoSelection | None:
    """The row UCX chose for the probe's WRITE: the initiator's put, to another process, at `size`."""
    # As UCX 1.19 words it: "... from host memory to host", "... from cuda/GPU0 to cuda/dev[3]".
    source = "from cuda/" if mem == "VRAM" else "from host memory to host"
    candidates = [r for r in rows
                  if r.context == context and r.scope != "self"
                  and r.operation.startswith("remote memory write")
                  and source in r.operation and r.covers(size)]
    # The last table printed is the one in force (UCX reprints when an endpoint is reconfigured).
    return candidates[-1] if candidates else None


@dataclass
class NixlCheckResult:
    where: str  # "image <ref>" or "host python <path>"
    mem: str  # DRAM or VRAM
    size: int
    ok: bool
    state: str | None = None
    backend: str | None = None
    bytes_equal: bool = False
    transports: list[str] = field(default_factory=list)
    ucx_config: str | None = None  # "cma/memory"
    ucx_protocol: str | None = None  # "zero-copy"
    seconds: float | None = None
    memlock_soft: int | None = None
    gpus: tuple[int, int] | None = None
    error: str | None = None
    output_tail: str = ""

    def as_dict(self) -> dict:
        data = asdict(self)
        data.pop("output_tail")
        return data


def interpret(output: str, *, where: str, mem: str, size: int,
              gpus: tuple[int, int] | None = None) -> NixlCheckResult:
    """Turn the probe's combined output into a result (pure: tested on real captured output)."""
    probe = None
    for line in output.splitlines():
        if line.startswith(RESULT_PREFIX):
            probe = json.loads(line[len(RESULT_PREFIX):])
    tail = "\n".join(output.strip().splitlines()[-15:])
    if probe is None:
        return NixlCheckResult(where=where, mem=mem, size=size, ok=False, gpus=gpus,
                               error="the probe printed no result line (it crashed; see its output)",
                               output_tail=tail)
    chosen = write_selection(parse_proto_info(output), mem, size)
    return NixlCheckResult(
        where=where, mem=mem, size=size, ok=bool(probe.get("ok")), state=probe.get("state"),
        backend=probe.get("backend"), bytes_equal=bool(probe.get("bytes_equal")),
        transports=chosen.transports if chosen else [],
        ucx_config=chosen.config if chosen else None,
        ucx_protocol=chosen.description if chosen else None,
        seconds=probe.get("seconds"), memlock_soft=probe.get("memlock_soft"), gpus=gpus,
        error=probe.get("error"), output_tail=tail)


def _probe_args(mem: str, size: int, gpus: tuple[int, int] | None) -> list[str]:
    args = ["--mem", mem, "--size", str(size)]
    if gpus is not None:
        args += ["--initiator-gpu", str(gpus[0]), "--target-gpu", str(gpus[1])]
    return args


def _probe_env() -> dict[str, str]:
    env = {"UCX_PROTO_INFO": "y"}
    # A transport list the user pinned for the deployment is what the probe must honour too.
    if os.environ.get("UCX_TLS"):
        env["UCX_TLS"] = os.environ["UCX_TLS"]
    return env


def host_python_can_probe(python: str = sys.executable) -> bool:
    try:
        return run([python, "-c", "import nixl_cu13"], timeout=60, check=False).ok
    except CommandFailed:  # no such Python, or it hung: it cannot probe
        return False


def run_on_host(*, mem: str = "DRAM", size: int = 4096, gpus: tuple[int, int] | None = None,
                python: str = sys.executable, timeout: float = 120) -> NixlCheckResult:
    """Run the probe with this host's Python (nixl_cu13 must import there)."""
    env = {**os.environ, **_probe_env()}
    try:
        output = run([python, str(PROBE_PATH), *_probe_args(mem, size, gpus)], env=env, timeout=timeout,
                     check=False, merge_output=True).stdout
    except CommandTimedOut as exc:
        output = exc.output + f"\n(probe killed after {timeout:.0f} s)"
    return interpret(output, where=f"host python {python}", mem=mem, size=size, gpus=gpus)


def run_in_image(image: str, *, mem: str = "VRAM", size: int = 4096,
                 gpus: tuple[int, int] | None = (0, 4), timeout: float = 300) -> NixlCheckResult:
    """Run the probe inside `image` with the settings the compose files give the workers."""
    from bundle.stack import engine  # the Docker boundary (engine side)

    output = engine.run_probe_container(
        image,
        ["python3", PROBE_IN_CONTAINER, *_probe_args(mem, size, gpus)],
        probe_file=PROBE_PATH, probe_target=PROBE_IN_CONTAINER, env=_probe_env(),
        gpus=mem == "VRAM", timeout=timeout)
    return interpret(output, where=f"image {image}", mem=mem, size=size, gpus=gpus)


def transport_verdict(result: NixlCheckResult) -> tuple[str, str]:
    """("ok"|"warn", why) for the transport alone: is it the fast path for this memory type?"""
    used = set(result.transports)
    if not used:
        return "warn", "UCX printed no protocol table for the write; the transport is unknown"
    if result.mem == "VRAM":
        if used & GPU_DIRECT_TRANSPORTS:
            return "ok", "GPU to GPU through CUDA IPC, the fast path for the KV cache"
        return "warn", (f"VRAM moved over {', '.join(sorted(used))}, not cuda_ipc: the KV cache will "
                        "be staged through host memory or the network")
    if used & SHARED_MEMORY_TRANSPORTS:
        return "ok", "host memory through a shared-memory transport"
    return "warn", f"host memory moved over {', '.join(sorted(used))}, not shared memory"
