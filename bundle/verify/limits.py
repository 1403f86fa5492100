"""Each bench level set against the limit: the cost model (cost_model.py) for what ran, the verdict
(verdict.py) on how far the level was from it. One `Limits` is made per run, before the first level
(it reads the model's config.json, the launch's attestation (the decode servers' TP, EP and DP attention,
kernel paths, CUDA graphs), collectives.json (the P2P decision, and doctor's small-message latency where
its probe wrote one: collective_latency.from_collectives) and nvidia-smi, and on the CPU engine probes the
host's memory bandwidth); scoring a level is arithmetic (benchmarks/bench_scoring.py times it).
`score_level(..., profile=...)` takes a profile's per-family table of the level (verdict.ProfileEvidence)
as more evidence; `judged()` scores any run shape, as `bundle score` does for a figure measured elsewhere."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from bundle import modes
from bundle.verify import collective_latency, cost_model, gpu_state, host_bandwidth, verdict
from bundle.verify import metrics as metric_names
from bundle.verify.collective_latency import CollectiveLatency

# SGLang's DSpark block size when neither the config nor the checkpoint sets one (speculative_hook).
DSPARK_DEFAULT_BLOCK = 7
# levers.speculative -> draft tokens per request per step (the verify step holds these + 1).
LEVER_DRAFTS = {"none": 0, "mtp": 3, "mtp-light": 1}


@dataclass(frozen=True)
class Limits:
    """What scores a run's levels; `why_not` says why there is no score (then the rest may be None)."""

    model: cost_model.ModelShape | None
    hardware: cost_model.Hardware | None
    tp: int
    servers: int  # servers that decode (dp: replicas), over which the concurrency spreads
    draft_tokens: int
    evidence: verdict.Evidence
    why_not: str | None = None
    ep: int = 1  # expert parallelism of the decoding servers (1: off)
    dp_attention: bool = False
    latency: CollectiveLatency | None = None  # doctor's measured small-message latency (None: cited)
    cuda_graphs: bool | None = None  # None: not known (taken as on, SGLang's default)
    draft_passes: int | None = None  # the draft's passes per step; None: one per drafted token (EAGLE, top-k 1)

    def describe(self) -> dict:
        """The run record's `limits` entry: what the levels were scored against."""
        if self.why_not:
            return {"scored": False, "why_not": self.why_not}
        hw = self.hardware
        return {"scored": True, "figure": hw.figure, "hardware": hw.name, "memory_gb_s": round(hw.memory_gb_s, 2),
                "tflops": hw.tflops, "link_gb_s": hw.link_gb_s, "link_source": hw.link_source,
                "sources": hw.sources, "model": self.model.name, "model_notes": list(self.model.notes),
                "active_params": round(self.model.active_params()), "tp": self.tp, "ep": self.ep,
                "dp_attention": self.dp_attention, "decoding_servers": self.servers,
                "draft_tokens": self.draft_tokens, "evidence": list(self.evidence.sources),
                "collective_latency": (self.latency or collective_latency.for_group(self.tp)).source
                if hw.figure == "gpu" and self.tp > 1 else None}


def score_level(limits: Limits, level: dict, config: dict,
                profile: verdict.ProfileEvidence | None = None) -> dict | None:
    """A level's `limit` entry (MBU, MFU, the floor of TPOT and its parts, ratio, verdict); None without a
    TPOT or a score. `profile`: the level's per-family table where a profile ran (evidence for the verdict)."""
    metrics = level.get("metrics") or {}
    tpot = metrics.get(metric_names.TPOT)
    if limits.why_not or not tpot or tpot <= 0:
        return None
    concurrency = max(1, math.ceil(int(level.get("concurrency") or 1) / max(limits.servers, 1)))
    run = cost_model.RunShape(tp=limits.tp, concurrency=concurrency, input_len=int(config.get("input_len") or 1),
                              output_len=int(config.get("output_len") or 1), draft_tokens=limits.draft_tokens,
                              accept_length=metrics.get(metric_names.ACCEPT_LENGTH), ep=limits.ep,
                              dp_attention=limits.dp_attention, draft_passes=limits.draft_passes)
    return judged(limits, run, float(tpot), profile=profile)


def judged(limits: Limits, run: cost_model.RunShape, tpot_ms: float,
           profile: verdict.ProfileEvidence | None = None) -> dict:
    """One run shape's measured TPOT scored and judged: the `limit` entry of a level."""
    scored = cost_model.score(limits.model, run, limits.hardware, tpot_ms, latency=limits.latency,
                              cuda_graphs=limits.cuda_graphs)
    evidence = limits.evidence if profile is None else replace(limits.evidence, profile=profile,
                                                               sources=limits.evidence.sources + ("profile",))
    parts = scored.parts
    level = verdict.Level(figure=scored.figure, floor_share=scored.floor_share, mbu=scored.mbu,
                          measured_ms=tpot_ms, floor_ms=scored.floor_tpot_ms, binding=parts.binding(),
                          floor_line=parts.line(), tp=run.tp, batch=run.concurrency, layers=limits.model.layers,
                          collectives=parts.collectives, collective_each_us=parts.collective_each_us,
                          speculative=run.draft_tokens > 0, accept_length=run.accept_length if run.draft_tokens else None,
                          link_ms=scored.link_ms, ep=run.ep)
    return scored.as_dict() | {"verdict": verdict.judge(level, evidence).as_dict()}


def verdict_lines(record: dict) -> list[str]:
    """One line per scored level, the floor's parts below it, its causes indented below (plain text)."""
    lines = []
    described = record.get("limits") or {}
    if described and not described.get("scored"):
        return [f"limit: not scored: {described.get('why_not')}"]
    for level in record.get("levels", []):
        limit = level.get("limit")
        if not limit:
            continue
        lines += limit_lines(f"C={level['concurrency']}", limit)
    return lines


def limit_lines(label: str, limit: dict) -> list[str]:
    """A scored level's headline, its floor's parts and its causes (plain text)."""
    v = limit["verdict"]
    lines = [f"{label}: {v['headline']}; TPOT {limit['measured_tpot_ms']:.2f} ms against a floor of "
             f"{limit['floor_tpot_ms']:.3f} ms ({limit['ratio']:.1f}x)"
             + (f", MFU {limit['mfu'] * 100:.2f}%" if limit.get("mfu") is not None else "")
             + ("" if limit["basis"] == "step" else f"; {limit['basis']}")]
    if v.get("binds"):
        lines.append(f"  floor: {v['binds']}")
    for i, cause in enumerate(v["causes"], 1):
        share = f" [up to {cause['explains_ms']:.1f} ms]" if not cause["seen"] else f" [{cause['explains_ms']:.1f} ms]"
        lines.append(f"  {i}. {cause['name']}: {cause['detail']}" + ("" if cause["seen"] else " (not checked)")
                     + (share if cause.get("explains_ms") else ""))
    return lines


# ---- building one --------------------------------------------------------------------------------------
def _read_json(path: Path | None) -> dict | None:
    try:
        return json.loads(path.read_text()) if path and path.is_file() else None
    except (OSError, ValueError):
        return None


def _shaped(attestation: dict | None) -> dict | None:
    """attestation.json as attest.py writes it (lists of objects), else None: a hand-edited file is
    left out of the evidence, never a crash of the bench."""
    if not isinstance(attestation, dict):
        return None
    parts = [attestation.get("records") or [], attestation.get("findings") or []]
    if not all(isinstance(p, list) and all(isinstance(x, dict) for x in p) for p in parts):
        return None
    return attestation


def _drafts(attestation: dict | None, speculative: str, dspark_block: int | None) -> int:
    """Draft tokens per request per step: what the decode servers resolved, else what the levers ask."""
    for r in (attestation or {}).get("records") or []:
        f = r.get("fields") or {}
        if r.get("role") == "prefill" or not f.get("speculative_algorithm"):
            continue
        if f.get("speculative_dspark_block_size"):
            return int(f["speculative_dspark_block_size"])
        if f.get("speculative_num_draft_tokens"):
            return max(int(f["speculative_num_draft_tokens"]) - 1, 0)
    if speculative == "dspark":
        return dspark_block or DSPARK_DEFAULT_BLOCK
    return LEVER_DRAFTS.get(speculative, 0)


def _draft_passes(attestation: dict | None, speculative: str) -> int | None:
    """DSpark drafts its whole block in one pass of its draft; EAGLE with top-k 1 (mtp, mtp-light) one token a
    pass (None: the cost model's default). What the decode servers resolved, else what the levers ask."""
    for r in (attestation or {}).get("records") or []:
        f = r.get("fields") or {}
        if r.get("role") != "prefill" and f.get("speculative_algorithm"):
            return 1 if str(f["speculative_algorithm"]).upper() == "DSPARK" else None
    return 1 if speculative == "dspark" else None


def _layout(attestation: dict | None) -> tuple[int, bool]:
    """(EP size, DP attention) the decode servers resolved (attestation's fields), else (1, False)."""
    for r in (attestation or {}).get("records") or []:
        f = r.get("fields") or {}
        if r.get("role") == "prefill":
            continue
        try:
            return max(int(f.get("ep_size") or 1), 1), bool(f.get("enable_dp_attention"))
        except (TypeError, ValueError):
            break
    return 1, False


def build(*, kind: str, model_folder: str | None, gpu_names: list[str], tp: int, servers: int, gpus: tuple[int, ...],
          speculative: str = "none", dspark_block: int | None = None, attestation_path: Path | None = None,
          collectives_path: Path | None = None, host_gb_s: float | None = None, fp8_wo_a: bool = False) -> Limits:
    """The Limits of a run of `kind` ("gpu", "engine" or "sim")."""
    attestation = _shaped(_read_json(attestation_path))
    collectives = _read_json(collectives_path)
    state = gpu_state.read(gpus) if kind == "gpu" else {}
    latency = collective_latency.from_collectives(collectives)
    ep, dp_attention = _layout(attestation)
    try:
        evidence = verdict.evidence_from(attestation, collectives, state, latency_measured=latency is not None)
    except (AttributeError, TypeError, ValueError):  # a hand-edited file: score without it
        evidence = verdict.evidence_from(None, None, state)
        latency, ep, dp_attention = None, 1, False
    drafts = _drafts(attestation, speculative, dspark_block)

    def none(why: str) -> Limits:
        return Limits(None, None, tp, servers, drafts, evidence, why, ep=ep, dp_attention=dp_attention)

    mode = modes.registry().MODES.get(kind)
    if mode is not None and not mode.hardware_bound:
        return none(f"a {mode.name} {modes.word()} ({mode.description}): its speed is the mode's own settings, not a "
                    f"limit of any hardware")
    if not model_folder or not (Path(model_folder) / "config.json").is_file():
        return none(f"no config.json in the model folder ({model_folder or 'not set'})")
    try:
        config = cost_model.load_config(model_folder)
        model = cost_model.model_shape(config, cost_model.safetensors_dtypes(model_folder), fp8_wo_a=fp8_wo_a)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return none(f"{Path(model_folder) / 'config.json'} could not be read as a model's shape ({exc})")
    if kind == "gpu":
        name = gpu_names[0] if gpu_names else state.get("gpu_name")
        hw = cost_model.gpu(name, busbw_gb_s=evidence.busbw_gb_s, power_limit_w=evidence.power_limit_w) if name else None
        if hw is None:
            return none(f"no figures for the GPU {name!r} in {cost_model.HARDWARE_FILE.name} (add one with its "
                        f"source; known: {', '.join(cost_model.known_gpus())})" if name else "nvidia-smi named no GPU")
    else:
        hw = cost_model.cpu(host_gb_s or host_bandwidth.probe_gb_s())
    return Limits(model, hw, tp, servers, drafts, evidence, ep=ep, dp_attention=dp_attention, latency=latency,
                  cuda_graphs=None if evidence.eager is None else not evidence.eager,
                  draft_passes=_draft_passes(attestation, speculative))
