"""Run the all-reduce probe (allreduce_probe.py) over a server's GPUs and read what it measured:
whether it finished, was right, which transport NCCL chose, bus bandwidth, and each small message's
latency (NCCL's, and SGLang's custom all-reduce where it is on).

Where: inside the worker image when it is here (`docker run` with the GPUs, host IPC, as the
servers run), else with this host's Python when torch with CUDA imports there; the result says
which. NCCL_DEBUG=INFO makes NCCL name the transport of every channel, e.g.

    host:123:456 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read
    host:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct

so a run with P2P on that NCCL quietly served through shared memory is told apart from one that
used P2P. `interpret` is pure: tested on captured and synthetic probe outputs; what the runs decide
lives in p2p_decision.py, the latencies' record in allreduce_latency.py.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bundle.doctor.allreduce_probe import RANK_PREFIX, RESULT_PREFIX
from bundle.errors import CommandFailed, CommandTimedOut
from bundle.run import run

PROBE_PATH = Path(__file__).resolve().with_name("allreduce_probe.py")
PROBE_IN_CONTAINER = "/opt/bundle-probe/allreduce_probe.py"
HANG_BOUND_S = 60.0  # per run, start to end: NCCL set-up takes seconds, a working all-reduce milliseconds
_CHANNEL = re.compile(r"Channel \d+/\d+ : \d+\[\d+\] -> \d+\[\d+\](?: \[\w+\])? via (?P<via>[A-Za-z0-9]+(?:/[\w.-]+)*)")


@dataclass
class AllReduceRun:
    """One probe run: a GPU group, P2P on or off, what happened."""

    gpus: tuple[int, ...]
    p2p: str  # "on" | "off"
    where: str
    ok: bool
    hung: bool = False
    seconds: float | None = None
    busbw_gbps: float | None = None  # the slowest rank's, NCCL-tests' bus bandwidth
    transports: list[str] = field(default_factory=list)  # "P2P/CUMEM/read", "SHM/direct/direct" ...
    peer_access: dict = field(default_factory=dict)
    nccl_version: str | None = None
    # {message bytes: seconds}, the slowest rank's at each size (a collective ends with its last rank)
    latency_s: dict[int, float] = field(default_factory=dict)
    custom_ar: dict = field(default_factory=dict)  # {"on": bool, "reason": str} or {"on": True, "latency_s": ...}
    error: str | None = None
    output_tail: str = ""

    @property
    def kinds(self) -> set[str]:
        """P2P, SHM, NET: the first part of each transport NCCL named."""
        return {t.split("/")[0] for t in self.transports}

    def as_dict(self) -> dict:
        data = asdict(self)
        data.pop("output_tail")
        return data

    def describe(self) -> str:
        if self.hung:
            return f"hung (no result within {HANG_BOUND_S:g} s)"
        if not self.ok:
            return f"failed: {self.error or 'see the output'}"
        via = ", ".join(sorted(self.kinds)) or "transport not reported"
        return f"{self.busbw_gbps:.1f} GB/s bus bandwidth via {via}" if self.busbw_gbps else f"ok via {via}"


def interpret(output: str, *, gpus, p2p: str, where: str) -> AllReduceRun:
    """The probe's combined output -> AllReduceRun (pure)."""
    result, ranks = None, []
    for line in output.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX):])
        elif line.startswith(RANK_PREFIX):
            ranks.append(json.loads(line[len(RANK_PREFIX):]))
    tail = "\n".join(output.strip().splitlines()[-20:])
    transports = sorted({m["via"] for m in _CHANNEL.finditer(output)})
    if result is None:
        return AllReduceRun(tuple(gpus), p2p, where, ok=False, transports=transports,
                       error="the probe printed no result line (it crashed or was killed; see its output)",
                       output_tail=tail)
    errors = [f"rank {r.get('rank')}: {r['error']}" for r in ranks if r.get("error")]
    bandwidths = [r["busbw_gbps"] for r in ranks if isinstance(r.get("busbw_gbps"), (int, float))]
    peer = next((r["peer_access"] for r in ranks if r.get("peer_access")), {})
    custom = next((r["custom_ar"] for r in ranks if r.get("custom_ar")), {})
    if custom.get("on"):
        custom = dict(custom, latency_s=_slowest([r.get("custom_ar", {}).get("latency_s") for r in ranks]))
    ok = bool(result.get("ok")) and len(ranks) == len(gpus) and all(r.get("ok") for r in ranks)
    error = result.get("error") or ("; ".join(errors) if errors else None)
    if not ok and error is None:
        error = f"{len(ranks)} of {len(gpus)} ranks reported (exit codes {result.get('exit_codes')})"
    return AllReduceRun(tuple(gpus), p2p, where, ok=ok, hung=bool(result.get("hung")),
                   seconds=result.get("seconds"), busbw_gbps=min(bandwidths) if bandwidths else None,
                   transports=transports, peer_access=peer,
                   nccl_version=next((r.get("nccl_version") for r in ranks if r.get("nccl_version")), None),
                   latency_s=_slowest([r.get("latency_s") for r in ranks]), custom_ar=custom,
                   error=error, output_tail=tail)


def _slowest(per_rank: list[dict | None]) -> dict[int, float]:
    """Each size's slowest rank: {"8192": s, ...} per rank -> {8192: s}. A size some rank lacks is left out."""
    sweeps = [s for s in per_rank if s]
    if not sweeps:
        return {}
    sizes = set.intersection(*(set(s) for s in sweeps))
    return {int(size): max(s[size] for s in sweeps) for size in sorted(sizes, key=int)}


def _probe_args(gpus, p2p: str, custom_ar: bool = False) -> list[str]:
    # SGLang's custom all-reduce needs P2P: timed only in the run that allows it
    return ["--gpus", ",".join(map(str, gpus)), "--p2p", p2p, "--timeout", str(HANG_BOUND_S),
            *(["--custom-ar"] if custom_ar and p2p == "on" else [])]


def host_python_can_probe(python: str = sys.executable) -> bool:
    """torch with CUDA (and NCCL) imports in this host's Python and sees a GPU."""
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() and torch.distributed.is_nccl_available() else 1)"
    try:
        return run([python, "-c", code], timeout=120, check=False).ok
    except CommandFailed:  # no such Python, or it hung
        return False


def run_on_host(gpus, p2p: str, *, python: str = sys.executable) -> AllReduceRun:  # pragma: no cover - gpu
    env = {k: v for k, v in os.environ.items() if k != "NCCL_P2P_DISABLE"}
    try:
        output = run([python, str(PROBE_PATH), *_probe_args(gpus, p2p)], env=env, timeout=HANG_BOUND_S + 60,
                     check=False, merge_output=True).stdout
    except CommandTimedOut as exc:
        output = exc.output
        output += f"\n(probe killed after {HANG_BOUND_S + 60:.0f} s)"
    return interpret(output, gpus=gpus, p2p=p2p, where=f"host python {python}")


def run_in_image(image: str, gpus, p2p: str) -> AllReduceRun:  # pragma: no cover - gpu
    # The image holds SGLang: its custom all-reduce is timed there too
    from bundle.stack import engine  # the Docker boundary (engine side)

    output = engine.run_probe_container(
        image, ["python3", PROBE_IN_CONTAINER, *_probe_args(gpus, p2p, custom_ar=True)], probe_file=PROBE_PATH,
        probe_target=PROBE_IN_CONTAINER, env={}, gpus=True, timeout=HANG_BOUND_S + 60)
    return interpret(output, gpus=gpus, p2p=p2p, where=f"image {image}")
