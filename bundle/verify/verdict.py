"""A verdict per bench level: near the floor the cost model sets (cost_model.py), or short of it or far
from it, with what binds the floor and the likely causes of the gap, ordered by how much of it each can
explain.

Bands, by the floor's share of the measured TPOT (floor / measured; the floor is the larger of the bandwidth
and compute times plus the collectives' latency and, without CUDA graphs, the kernel launches):
  near   >= 50%: what is left is kernel efficiency, the sampler beyond its read of the logits and the
               scheduler, which the floor leaves out; the best public DeepSeek-V4-Flash runs on these GPUs
               sit there.
  short  20-50%
  far    < 20%: the original deployment (Triton fallbacks on CUDA cores) reads 4%.
Per mode: a speculative level with a measured acceptance is scored per accepted token (the verify step's
floor over its tokens); without one it is scored per output token against a plain step's floor and its
headline says "acceptance unknown" (an effective share, which speculation can take past 100%).

Each cause carries the milliseconds per token of the gap it can explain: an estimate from the evidence
where the evidence shows it (attestation's live paths and CUDA graphs, doctor's collectives, nvidia-smi's
power cap and PCIe link, the server's speculative acceptance, a profile's per-family table), an upper
bound where nothing checked it. Causes are ordered by that figure, largest first; a cause the evidence
rules out is left out. A profile (profile_floor.py) measures what would otherwise be suspects: the kernels'
time by family (a fallback named from the trace), the gaps between them and the collectives, so with one
those suspects give way to its families, each explaining its time over its share of the floor. A near
level still names what binds its floor. On the CPU engine the figure is
the host's, and the verdict says what a 1 M-parameter model on CPU is bound by.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bundle import modes
from bundle.verify.collective_latency import CITED

NEAR_SHARE = 0.50
FAR_SHARE = 0.20
# Attestation findings (level WARN) that name a slow kernel path.
KERNEL_FINDINGS = ("MoE runner", "attention backend", "sm_120 sparse-MLA backend")
SLOW_SPARSE_MLA_ENV = {"triton", "torch"}
# SGLang's Triton sparse-MLA decode with DeepSeek-V4's 512-entry compressed cache, per call (one per layer
# per step), by batch: measured on an H200 (CONTEXT.md, third round). The seeds' profile put the MoE
# fallback at the same share of GPU time (39% against 38%), so a fallback MoE runner is given the same.
FALLBACK_CALL_US = ((1, 449.0), (8, 1560.0), (32, 5950.0), (64, 11800.0))
EAGER_SLOWDOWN = 10.0  # DeepSeek-V4-Flash on 2 GPUs: 10.4 tok/s eager against 104 with graphs (CONTEXT.md)
# Decode is memory bound: a power cap lowers the core clock more than the memory's; half the cap's cut
# is taken as the step's slowdown (an estimate; the 275 W public run is the case in point).
POWER_SENSITIVITY = 0.5
ACCEPTANCE_UNKNOWN = "speculative acceptance unknown"
WORST_LATENCY_S = max(t for table, _ in CITED.values() for t in table.values())  # across sockets


@dataclass(frozen=True)
class FamilyTime:
    """One kernel family of a profile's per-step table (bundle bench --profile; centre of the profile's
    reader): the time it took per step and, where the cost model has one, its share of the floor."""

    family: str  # e.g. "MoE GEMM", "attention and indexer", "collectives", "idle gaps"
    ms_per_step: float
    floor_ms_per_step: float | None = None
    kernels: tuple[str, ...] = ()  # the kernels' own names (a fallback is named from them)
    fallback: bool = False  # the trace names a fallback where attestation predicted a prebuilt kernel


@dataclass(frozen=True)
class ProfileEvidence:
    """A profile's per-family table of one level: the hook through which a profile adds evidence."""

    families: tuple[FamilyTime, ...]
    source: str  # where the trace came from (a file, "CPU activities" on the CPU engine)
    steps: int = 1


@dataclass(frozen=True)
class Evidence:
    """What is known about how the run ran; None: not checked."""

    slow_paths: tuple[str, ...] | None = None  # attestation's WARNs on kernel paths; () = none live
    eager: bool | None = None  # decode without CUDA graphs
    pcie_safe: bool | None = None  # NCCL_P2P_DISABLE=1 / no custom all-reduce
    busbw_gb_s: float | None = None  # doctor's NCCL all-reduce bus bandwidth (slowest rank)
    latency_measured: bool = False  # doctor's small-message latency table is in the floor
    power_limit_w: float | None = None
    power_default_w: float | None = None
    pcie_gen: tuple[int, int] | None = None  # (what this host allows, the GPU's own max): idle GPUs
    # train down to gen 1, so the current generation says nothing after a level
    pcie_width: tuple[int, int] | None = None  # (current, max)
    speculative: str | None = None  # None: not known; "none"; an algorithm
    profile: ProfileEvidence | None = None
    sources: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Cause:
    name: str
    detail: str
    seen: bool  # the evidence shows it (False: not checked, a suspect)
    explains_ms: float = 0.0  # of the gap, per token: an estimate where seen, an upper bound where not

    def line(self) -> str:
        return f"{self.name}: {self.detail}" + ("" if self.seen else " (not checked)")


@dataclass(frozen=True)
class Level:
    """What the verdict needs of a scored level (cost_model.Score's figures, per token)."""

    figure: str  # "gpu", "cpu"
    floor_share: float  # floor / measured
    mbu: float
    measured_ms: float
    floor_ms: float
    binding: str  # the floor's largest part
    floor_line: str  # the floor's parts, one line
    tp: int = 1
    batch: int = 1  # requests decoding at once on one server
    layers: int = 0
    collectives: int = 0
    collective_each_us: float = 0.0
    speculative: bool = False
    accept_length: float | None = None
    link_ms: float | None = None
    ep: int = 1  # expert parallelism: the floor counts the busiest rank


@dataclass(frozen=True)
class Verdict:
    band: str  # "near", "short", "far"
    share: float  # floor / measured
    mbu: float
    figure: str  # "gpu", "cpu"
    causes: tuple[Cause, ...]
    binds: str = ""  # what binds the floor, with its parts
    acceptance_unknown: bool = False

    def headline(self) -> str:
        words = {"near": "near the floor", "short": "short of the floor", "far": "far from the floor"}[self.band]
        cpu = " (CPU figure: the host's memory bandwidth, not a GPU's)" if self.figure == "cpu" else ""
        spec = " (speculative, acceptance unknown: per output token)" if self.acceptance_unknown else ""
        return f"{words}: {self.share * 100:.1f}% of the floor's speed, MBU {self.mbu * 100:.1f}%{spec}{cpu}"

    def as_dict(self) -> dict:
        return {"band": self.band, "headline": self.headline(), "share": round(self.share, 4), "binds": self.binds,
                "acceptance_unknown": self.acceptance_unknown,
                "causes": [{"name": c.name, "detail": c.detail, "seen": c.seen,
                            "explains_ms": round(c.explains_ms, 3)} for c in self.causes]}


def band(share: float) -> str:
    return "near" if share >= NEAR_SHARE else ("short" if share >= FAR_SHARE else "far")


def _fallback_call_us(batch: int) -> float:
    points = FALLBACK_CALL_US
    if batch <= points[0][0]:
        return points[0][1]
    for (b0, t0), (b1, t1) in zip(points, points[1:]):
        if batch <= b1:
            return t0 + (batch - b0) / (b1 - b0) * (t1 - t0)
    return points[-1][1] * batch / points[-1][0]


def judge(level: Level, evidence: Evidence) -> Verdict:
    """The verdict on one scored level: its band, what binds the floor, and the causes of the gap."""
    share = level.floor_share
    b = band(share)
    binds = f"bound by {level.binding}: {level.floor_line}"
    unknown = level.speculative and not level.accept_length
    if level.figure == "cpu":
        return Verdict(b, share, level.mbu, level.figure, (Cause(
            "per-step overhead", f"on the CPU {modes.word()} a tiny model's step is Python scheduling, thread "
            "hand-offs and (TP > 1) collectives between processes, not memory reads: expected, not a fault", True,
            max(level.measured_ms - level.floor_ms, 0.0)),), binds)
    gap = max(level.measured_ms - level.floor_ms, 0.0)
    # A suspect nothing checked that can explain none of the gap (a level at or past its floor) says nothing.
    causes = [c for c in _causes(level, evidence, gap)
              if c is not None and (c.seen or c.explains_ms > 0 or c.name == ACCEPTANCE_UNKNOWN)]
    causes.sort(key=lambda c: (-min(c.explains_ms, gap) if gap else 0.0, not c.seen))
    return Verdict(b, share, level.mbu, level.figure, tuple(causes), binds, acceptance_unknown=unknown)


def _causes(level: Level, evidence: Evidence, gap: float) -> list[Cause | None]:
    out: list[Cause | None] = []
    capped = lambda ms: min(ms, gap)  # noqa: E731 - a cause explains at most the gap
    # The gap is per token; a step's milliseconds are shared by the tokens a step yields per request.
    per_token = 1.0 / (level.accept_length if level.speculative and level.accept_length else 1.0)
    # A profile's families: each one's time over its share of the floor is gap it explains.
    if evidence.profile:
        for fam in evidence.profile.families:
            excess = fam.ms_per_step - (fam.floor_ms_per_step or 0.0)
            if excess <= 0:
                continue
            names = ", ".join(fam.kernels[:3])
            floor = (", not in the floor" if fam.floor_ms_per_step is None
                     else f" against {fam.floor_ms_per_step:.3g} ms of floor")
            out.append(Cause(f"profile: {fam.family}" + (" (fallback)" if fam.fallback else ""),
                             f"{fam.ms_per_step:.2f} ms a step{floor}"
                             + (f" ({names})" if names else "") + f"; {evidence.profile.source}", True,
                             capped(excess * per_token)))
    # What a profile measures is no longer a suspect: the kernels' time (a fallback is named from the
    # trace), the gaps between them (eager launches) and the collectives.
    profiled = evidence.profile is not None
    # Fallback kernels on CUDA cores: the original deployment's cause.
    per_path = level.layers * _fallback_call_us(level.batch) / 1000
    if evidence.slow_paths and profiled:  # named by attestation, timed by the profile's families
        out.append(Cause("fallback kernels", "; ".join(evidence.slow_paths) + " (its time is in the profile's "
                         "families)", True, 0.0))
    elif evidence.slow_paths:
        out.append(Cause("fallback kernels", "; ".join(evidence.slow_paths) + f" (about {per_path:.1f} ms a step "
                         f"per path: SGLang's Triton sparse-MLA decode took {_fallback_call_us(level.batch):.0f} us a "
                         f"call at batch {level.batch}, one call per layer)", True,
                         capped(per_path * len(evidence.slow_paths) * per_token)))
    elif profiled:
        pass
    elif evidence.slow_paths is None:
        out.append(Cause("fallback kernels", "Triton/torch paths on CUDA cores (sparse-MLA decode, MoE) were the "
                         "original deployment's tenfold loss; `bundle launch` attests them (attestation.json)", False,
                         gap))
    else:
        out.append(Cause("fallback kernels", "attestation lists none live, but it knows only the paths named so far: "
                         "a new fallback shows in a profile (`bundle bench --profile`)", False, gap))
    # Eager decode: every kernel launched from the host, and Python between them.
    eager_ms = level.measured_ms * (1 - 1 / EAGER_SLOWDOWN)
    if evidence.eager:
        out.append(Cause("eager mode", "decode runs without CUDA graphs: about 10x slower (levers.cuda_graphs)", True,
                         capped(eager_ms)))
    elif evidence.eager is None and not profiled:
        out.append(Cause("eager mode", "whether decode runs CUDA graphs (attestation's CUDA graphs line)", False,
                         capped(eager_ms)))
    # Power cap (clocks are not judged: read after a level they are idle clocks, not the run's).
    capped_w = (evidence.power_limit_w and evidence.power_default_w
                and evidence.power_limit_w < 0.95 * evidence.power_default_w)
    if capped_w:
        cut = 1 - evidence.power_limit_w / evidence.power_default_w
        out.append(Cause("power cap", f"power limit {evidence.power_limit_w:.0f} W of a default "
                         f"{evidence.power_default_w:.0f} W (nvidia-smi -pl)", True,
                         capped(level.measured_ms * cut * POWER_SENSITIVITY)))
    elif evidence.power_limit_w is None:
        out.append(Cause("power cap", "nvidia-smi's power.limit against power.default_limit (the Server Edition "
                         "goes down to 400 W)", False, capped(level.measured_ms * (1 - 400 / 600) * POWER_SENSITIVITY)))
    if level.tp > 1:
        # PCIe link trained below its best: the collectives' bytes take longer.
        low = [f"{what} {cur} of {best}" for what, pair in (("gen", evidence.pcie_gen), ("width x", evidence.pcie_width))
               if pair for cur, best in [pair] if cur < best]
        if low:
            slow = max(best / cur for pair in (evidence.pcie_gen, evidence.pcie_width) if pair
                       for cur, best in [pair] if cur and cur < best)
            out.append(Cause("PCIe link", "trained at " + ", ".join(low) + " (reseat, riser, BIOS lane settings)", True,
                             capped((level.link_ms or 0.0) * (slow - 1) + level.collectives * level.collective_each_us
                                    / 1000 * 0.5)))
        elif evidence.pcie_gen is None and not profiled:
            out.append(Cause("PCIe link", "nvidia-smi's pcie.link.width current against max, gen max against gpumax",
                             False, capped((level.link_ms or 0.0) * 3)))
        # Collectives slower than the floor's figure: through host memory, or across sockets.
        worse = level.collectives * max(WORST_LATENCY_S * 1e6 - level.collective_each_us, 0.0) / 1000
        if evidence.pcie_safe:
            bw = f"; NCCL bus bandwidth {evidence.busbw_gb_s:.1f} GB/s" if evidence.busbw_gb_s else ""
            out.append(Cause("PCIe-safe collectives", "NCCL_P2P_DISABLE=1 and no custom all-reduce: every all-reduce "
                             f"goes through host memory{bw} (collectives.json says why it was chosen)", True,
                             0.0 if evidence.latency_measured or profiled else capped(worse)))
        elif (evidence.pcie_safe is None or not evidence.latency_measured) and not profiled:
            out.append(Cause("collective latency", f"{level.collectives} collectives a step at "
                             f"{level.collective_each_us:.0f} us each (a cited figure); across CPU sockets or through "
                             f"host memory they cost up to {WORST_LATENCY_S * 1e6:.0f} us (`bundle doctor` measures "
                             "this host's)", False, capped(worse)))
    # Speculation.
    if level.speculative:
        if level.accept_length is None:
            out.append(Cause(ACCEPTANCE_UNKNOWN, "the server reported no acceptance length: the level "
                             "is scored per output token against a plain step's floor", False, 0.0))
        elif level.accept_length < 1.5:
            out.append(Cause("speculative decoding", f"{evidence.speculative or 'the draft'} accepts "
                             f"{level.accept_length:.2f} tokens per step: the verify step's extra tokens cost more "
                             "than they give", True, capped(level.floor_ms * (1.5 - level.accept_length))))
    # Expert parallelism: the floor counts the busiest rank under uniform routing; real routing is not.
    if level.ep > 1:
        out.append(Cause("expert imbalance", "under EP the busiest rank sets the step; the floor assumes uniform "
                         "routing (a profile or SGLang's expert distribution recorder shows the real one)", False,
                         capped(level.floor_ms * 0.3)))
    return out


def evidence_from(attestation: dict | None, collectives: dict | None, gpu_state: dict | None, *,
                  profile: ProfileEvidence | None = None, latency_measured: bool = False) -> Evidence:
    """Evidence from the launch's attestation.json, the project's collectives.json and an nvidia-smi
    reading (gpu_state.read()), each None when not there; a profile's per-family table where one ran."""
    slow, eager, spec, sources = None, None, None, []
    if attestation:
        sources.append("attestation")
        findings = attestation.get("findings") or []
        slow = tuple(f"{f.get('role')}: {f.get('what')}: {f.get('detail')}" for f in findings
                     if f.get("level") == "WARN" and f.get("what") in KERNEL_FINDINGS)
        records = attestation.get("records") or []
        for r in records:
            env = r.get("env") or {}
            if str(env.get("SGLANG_SM120_FLASHMLA_BACKEND") or "").lower() in SLOW_SPARSE_MLA_ENV and not slow:
                slow = (f"{r.get('role')}: SGLANG_SM120_FLASHMLA_BACKEND={env['SGLANG_SM120_FLASHMLA_BACKEND']}",)
            if str(env.get("SGLANG_FP8_PAGED_MQA_LOGITS_TORCH") or "").lower() in ("1", "true"):
                slow = tuple(slow or ()) + (f"{r.get('role')}: SGLANG_FP8_PAGED_MQA_LOGITS_TORCH=1 (torch MQA logits)",)
        graphs = [((r.get("fields") or {}).get("cuda_graphs") or {}).get("decode", {}).get("backend")
                  for r in records if r.get("role") != "prefill"]
        graphs = [g for g in graphs if g]
        if graphs:
            eager = any(g == "disabled" for g in graphs)
        algos = [(r.get("fields") or {}).get("speculative_algorithm") for r in records]
        spec = next((a for a in algos if a), "none") if records else None
    pcie_safe, busbw = None, None
    if collectives:
        sources.append("collectives")
        pcie_safe = collectives.get("pcie_safe")
        busbw = _busbw(collectives.get("evidence") or {}, on=not pcie_safe)
    state = gpu_state or {}
    if state:
        sources.append("nvidia-smi")
    if profile:
        sources.append("profile")
    return Evidence(slow_paths=slow, eager=eager, pcie_safe=pcie_safe, busbw_gb_s=busbw,
                    latency_measured=latency_measured,
                    power_limit_w=state.get("power_limit_w"), power_default_w=state.get("power_default_w"),
                    pcie_gen=state.get("pcie_gen"), pcie_width=state.get("pcie_width"), speculative=spec,
                    profile=profile, sources=tuple(sources))


def _busbw(evidence: dict, *, on: bool) -> float | None:
    """The slowest NCCL bus bandwidth doctor measured with P2P as the servers run it (any nesting)."""
    found: list[float] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("busbw_gbps"), (int, float)) and node.get("p2p", "on" if on else "off") == \
                    ("on" if on else "off"):
                found.append(float(node["busbw_gbps"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(evidence)
    return min(found) if found else None
