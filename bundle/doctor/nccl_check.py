"""Run the NCCL probe (nccl_probe.py) over each server's GPUs with P2P on and off, read what it
measured, and decide levers.pcie_safe_collectives: auto for this host.

Where: inside the worker image when it is here (`docker run` with the GPUs, host IPC, as the
servers run), else with this host's Python when torch with CUDA imports there; the result says
which. NCCL_DEBUG=INFO makes NCCL name the transport of every channel, e.g.

    host:123:456 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read
    host:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct

so a run with P2P on that NCCL quietly served through shared memory is told apart from one that
used P2P. The decision (`decide`) is pure: tested on captured and synthetic probe outputs.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bundle.config.levers import Collectives
from bundle.doctor.nccl_probe import RANK_PREFIX, RESULT_PREFIX
from bundle.errors import CommandFailed, CommandTimedOut
from bundle.run import run

PROBE_PATH = Path(__file__).resolve().with_name("nccl_probe.py")
PROBE_IN_CONTAINER = "/opt/bundle-probe/nccl_probe.py"
HANG_BOUND_S = 60.0  # per run, start to end: NCCL set-up takes seconds, a working all-reduce milliseconds
_CHANNEL = re.compile(r"Channel \d+/\d+ : \d+\[\d+\] -> \d+\[\d+\](?: \[\w+\])? via (?P<via>[A-Za-z0-9]+(?:/[\w.-]+)*)")


@dataclass
class NcclRun:
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


def interpret(output: str, *, gpus, p2p: str, where: str) -> NcclRun:
    """The probe's combined output -> NcclRun (pure)."""
    result, ranks = None, []
    for line in output.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX):])
        elif line.startswith(RANK_PREFIX):
            ranks.append(json.loads(line[len(RANK_PREFIX):]))
    tail = "\n".join(output.strip().splitlines()[-20:])
    transports = sorted({m["via"] for m in _CHANNEL.finditer(output)})
    if result is None:
        return NcclRun(tuple(gpus), p2p, where, ok=False, transports=transports,
                       error="the probe printed no result line (it crashed or was killed; see its output)",
                       output_tail=tail)
    errors = [f"rank {r.get('rank')}: {r['error']}" for r in ranks if r.get("error")]
    bandwidths = [r["busbw_gbps"] for r in ranks if isinstance(r.get("busbw_gbps"), (int, float))]
    peer = next((r["peer_access"] for r in ranks if r.get("peer_access")), {})
    ok = bool(result.get("ok")) and len(ranks) == len(gpus) and all(r.get("ok") for r in ranks)
    error = result.get("error") or ("; ".join(errors) if errors else None)
    if not ok and error is None:
        error = f"{len(ranks)} of {len(gpus)} ranks reported (exit codes {result.get('exit_codes')})"
    return NcclRun(tuple(gpus), p2p, where, ok=ok, hung=bool(result.get("hung")),
                   seconds=result.get("seconds"), busbw_gbps=min(bandwidths) if bandwidths else None,
                   transports=transports, peer_access=peer,
                   nccl_version=next((r.get("nccl_version") for r in ranks if r.get("nccl_version")), None),
                   error=error, output_tail=tail)


def _probe_args(gpus, p2p: str) -> list[str]:
    return ["--gpus", ",".join(map(str, gpus)), "--p2p", p2p, "--timeout", str(HANG_BOUND_S)]


def host_python_can_probe(python: str = sys.executable) -> bool:
    """torch with CUDA (and NCCL) imports in this host's Python and sees a GPU."""
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() and torch.distributed.is_nccl_available() else 1)"
    try:
        return run([python, "-c", code], timeout=120, check=False).ok
    except CommandFailed:  # no such Python, or it hung
        return False


def run_on_host(gpus, p2p: str, *, python: str = sys.executable) -> NcclRun:  # pragma: no cover - gpu
    env = {k: v for k, v in os.environ.items() if k != "NCCL_P2P_DISABLE"}
    try:
        output = run([python, str(PROBE_PATH), *_probe_args(gpus, p2p)], env=env, timeout=HANG_BOUND_S + 60,
                     check=False, merge_output=True).stdout
    except CommandTimedOut as exc:
        output = exc.output
        output += f"\n(probe killed after {HANG_BOUND_S + 60:.0f} s)"
    return interpret(output, gpus=gpus, p2p=p2p, where=f"host python {python}")


def run_in_image(image: str, gpus, p2p: str) -> NcclRun:  # pragma: no cover - gpu
    from bundle.stack import engine  # the Docker boundary (engine side)

    output = engine.run_probe_container(
        image, ["python3", PROBE_IN_CONTAINER, *_probe_args(gpus, p2p)], probe_file=PROBE_PATH,
        probe_target=PROBE_IN_CONTAINER, env={}, gpus=True, timeout=HANG_BOUND_S + 60)
    return interpret(output, gpus=gpus, p2p=p2p, where=f"image {image}")


# ---- the decision ----------------------------------------------------------------------------------
def decide(runs: dict[str, dict[str, NcclRun]], links: dict[str, list[str]] | None = None) -> Collectives:
    """levers.pcie_safe_collectives: auto for this host, from each group's runs {"on": ..., "off": ...}
    and doctor's P2P topology (group -> nvidia-smi link codes), as evidence.

    P2P (and SGLang's custom all-reduce, which needs P2P) only where every group's all-reduce with
    P2P finished, was right, used P2P between GPUs that can access each other, and was not slower
    than without it; anything else takes the safe setting.
    """
    evidence = {"groups": {name: {p2p: run.as_dict() for p2p, run in pair.items()} for name, pair in runs.items()},
                "links": links or {}}
    if not runs:
        return Collectives(True, "fallback", "no GPU group was probed: the safe setting", evidence)
    problems, notes = [], []
    for name, pair in runs.items():
        on, off = pair.get("on"), pair.get("off")
        if on is None or not on.ok:
            what = on.describe() if on else "not run"
            rescue = (f"; without P2P it {off.describe()}" if off is not None else "")
            problems.append(f"{name} (GPUs {','.join(map(str, on.gpus if on else ()))}): all-reduce with P2P {what}{rescue}")
            continue
        denied = sorted(pair for pair, ok in (on.peer_access or {}).items() if not ok)
        if denied:
            # SGLang's custom all-reduce maps its peers' buffers: without peer access it cannot work.
            problems.append(f"{name}: no peer access between GPUs {', '.join(denied)} (torch.cuda.can_device_access_peer)")
            continue
        if "P2P" not in on.kinds and on.transports:
            problems.append(f"{name}: NCCL chose {', '.join(sorted(on.kinds))} even with P2P allowed: P2P is "
                            f"not used here, so disabling it costs nothing")
            continue
        if off is not None and off.ok and on.busbw_gbps and off.busbw_gbps and on.busbw_gbps < off.busbw_gbps:
            problems.append(f"{name}: P2P is slower ({on.busbw_gbps:.1f} GB/s) than without it "
                            f"({off.busbw_gbps:.1f} GB/s)")
            continue
        notes.append(f"{name}: with P2P {on.describe()}"
                     + (f", without {off.describe()}" if off is not None else ""))
    if problems:
        return Collectives(True, "probe", "PCIe-safe collectives (NCCL_P2P_DISABLE=1, --disable-custom-all-reduce): "
                                          + "; ".join(problems), evidence)
    return Collectives(False, "probe", "P2P collectives (SGLang's default): " + "; ".join(notes), evidence)


def without_p2p_failures(runs: dict[str, dict[str, NcclRun]]) -> list[str]:
    """Groups whose all-reduce fails even with P2P off: the servers will not start there."""
    return [f"{name}: {pair['off'].describe()}" for name, pair in runs.items()
            if pair.get("off") is not None and not pair["off"].ok]
