"""A verdict per bench level: near the limit the cost model sets (cost_model.py), or short of it or far
from it, with the likely causes in order, from what the bundle already knows about the run.

Bands, by MBU (the floor of TPOT / the measured TPOT):
  near   >= 50%: small all-reduces over PCIe (86 a step at TP4) cost latency the bandwidth floor leaves
               out; the best public DeepSeek-V4-Flash figures on these GPUs sit at 40-65%.
  short  20-50%
  far    < 20%: the original deployment (Triton fallbacks on CUDA cores) scored 2%.

Causes come from evidence (Evidence: attestation's live paths and CUDA graphs, the collectives decision
and doctor's NCCL bus bandwidth, the power cap and PCIe link nvidia-smi reports, the speculative
settings and their acceptance). A cause the evidence shows comes first; then those nothing checked, in
the order they have been seen to cost the most on sm_120 (fallback kernels first: the original
deployment's 38% + 39% of GPU time); a cause the evidence rules out is left out. On the CPU rehearsal
the figure is the host's, and the verdict says what a 1 M-parameter model on CPU is bound by.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NEAR_MBU = 0.50
FAR_MBU = 0.20
# Attestation findings (level WARN) that name a slow kernel path.
KERNEL_FINDINGS = ("MoE runner", "attention backend", "sm_120 sparse-MLA backend")
SLOW_SPARSE_MLA_ENV = {"triton", "torch"}


@dataclass(frozen=True)
class Evidence:
    """What is known about how the run ran; None: not checked."""

    slow_paths: tuple[str, ...] | None = None  # attestation's WARNs on kernel paths; () = none live
    eager: bool | None = None  # decode without CUDA graphs
    pcie_safe: bool | None = None  # NCCL_P2P_DISABLE=1 / no custom all-reduce
    busbw_gb_s: float | None = None  # doctor's NCCL all-reduce bus bandwidth (slowest rank)
    power_limit_w: float | None = None
    power_default_w: float | None = None
    pcie_gen: tuple[int, int] | None = None  # (what this host allows, the GPU's own max): idle GPUs
    # train down to gen 1, so the current generation says nothing after a level
    pcie_width: tuple[int, int] | None = None  # (current, max)
    speculative: str | None = None  # None: not known; "none"; an algorithm
    sources: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Cause:
    name: str
    detail: str
    seen: bool  # the evidence shows it (False: not checked, a suspect)

    def line(self) -> str:
        return f"{self.name}: {self.detail}" + ("" if self.seen else " (not checked)")


@dataclass(frozen=True)
class Verdict:
    band: str  # "near", "short", "far"
    mbu: float
    figure: str  # "gpu", "cpu"
    causes: tuple[Cause, ...]

    def headline(self) -> str:
        words = {"near": "near the limit", "short": "short of the limit", "far": "far from the limit"}[self.band]
        cpu = " (CPU figure: the host's memory bandwidth, not a GPU's)" if self.figure == "cpu" else ""
        return f"{words}: MBU {self.mbu * 100:.1f}%{cpu}"

    def as_dict(self) -> dict:
        return {"band": self.band, "headline": self.headline(),
                "causes": [{"name": c.name, "detail": c.detail, "seen": c.seen} for c in self.causes]}


def band(mbu: float) -> str:
    return "near" if mbu >= NEAR_MBU else ("short" if mbu >= FAR_MBU else "far")


def judge(mbu: float, *, figure: str, evidence: Evidence, tp: int, accept_length: float | None = None) -> Verdict:
    """The verdict on one level's MBU, with causes when it is not near."""
    b = band(mbu)
    if b == "near":
        return Verdict(b, mbu, figure, ())
    if figure == "cpu":
        return Verdict(b, mbu, figure, (Cause(
            "per-step overhead", "on the CPU rehearsal a tiny model's step is Python scheduling, thread "
            "hand-offs and (TP > 1) collectives between processes, not memory reads: expected, not a fault", True),))
    seen, unchecked = [], []

    def add(cause: Cause) -> None:
        (seen if cause.seen else unchecked).append(cause)

    # 1. Fallback kernels on CUDA cores: the original deployment's cause.
    if evidence.slow_paths:
        add(Cause("fallback kernels", "; ".join(evidence.slow_paths), True))
    elif evidence.slow_paths is None:
        add(Cause("fallback kernels", "Triton/torch paths on CUDA cores (sparse-MLA decode, MoE) were the original "
                  "deployment's tenfold loss; `bundle launch` attests them (attestation.json)", False))
    else:
        add(Cause("fallback kernels", "attestation lists none live, but it knows only the paths named so far: a "
                  "new fallback shows in a profile (nsys, or SGLang's /start_profile)", False))
    # 2. Eager decode.
    if evidence.eager:
        add(Cause("eager mode", "decode runs without CUDA graphs: about 10x slower (levers.cuda_graphs)", True))
    elif evidence.eager is None:
        add(Cause("eager mode", "whether decode runs CUDA graphs (attestation's CUDA graphs line)", False))
    # 3. Power cap (clocks are not judged: read after a level they are idle clocks, not the run's).
    capped = (evidence.power_limit_w and evidence.power_default_w
              and evidence.power_limit_w < 0.95 * evidence.power_default_w)
    if capped:
        add(Cause("power cap", f"power limit {evidence.power_limit_w:.0f} W of a default "
                  f"{evidence.power_default_w:.0f} W (nvidia-smi -pl)", True))
    elif evidence.power_limit_w is None:
        add(Cause("power cap", "nvidia-smi's power.limit against power.default_limit", False))
    # 4. PCIe link trained below its best.
    low_link = [f"{what} {cur} of {best}" for what, pair in (("gen", evidence.pcie_gen), ("width x", evidence.pcie_width))
                if pair for cur, best in [pair] if cur < best]
    if low_link and tp > 1:
        add(Cause("PCIe link", "trained at " + ", ".join(low_link) + " (reseat, riser, BIOS lane settings)", True))
    elif evidence.pcie_gen is None and tp > 1:
        add(Cause("PCIe link", "nvidia-smi's pcie.link.width current against max, gen max against gpumax", False))
    # 5. Collectives forced through host memory.
    if tp > 1:
        if evidence.pcie_safe:
            bw = f"; NCCL bus bandwidth {evidence.busbw_gb_s:.1f} GB/s" if evidence.busbw_gb_s else ""
            add(Cause("PCIe-safe collectives", "NCCL_P2P_DISABLE=1 and no custom all-reduce: every all-reduce "
                      f"goes through host memory{bw} (collectives.json says why it was chosen)", True))
        elif evidence.pcie_safe is None:
            add(Cause("collectives", "whether all-reduces run P2P (collectives.json, `bundle doctor`)", False))
    # 6. Speculation that does not pay.
    if evidence.speculative not in (None, "none") and accept_length is not None and accept_length < 1.5:
        add(Cause("speculative decoding", f"{evidence.speculative} accepts {accept_length:.2f} tokens per step: "
                  "the verify step's extra tokens cost more than they give", True))
    # Always: TP over PCIe pays per-collective latency the bandwidth floor leaves out.
    if tp > 1:
        unchecked.append(Cause("collective latency", "two small all-reduces per layer per step over PCIe cost "
                               "microseconds each whatever the bandwidth: part of any TP run's gap", False))
    return Verdict(b, mbu, figure, tuple(seen + unchecked))


def evidence_from(attestation: dict | None, collectives: dict | None, gpu_state: dict | None) -> Evidence:
    """Evidence from the launch's attestation.json, the project's collectives.json and an nvidia-smi
    reading (gpu_state.read()), each None when not there."""
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
    return Evidence(slow_paths=slow, eager=eager, pcie_safe=pcie_safe, busbw_gb_s=busbw,
                    power_limit_w=state.get("power_limit_w"), power_default_w=state.get("power_default_w"),
                    pcie_gen=state.get("pcie_gen"), pcie_width=state.get("pcie_width"), speculative=spec,
                    sources=tuple(sources))


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
