"""`bundle score` as a service: a figure measured anywhere (the seeds' run, a colleague's, a vendor's)
scored against the same floor and judged by the same verdict as a `bundle bench` level, with no GPU and
no running stack. The verb parses its flags into a ScoreRequest and prints the result's table and lines.

The run's shape comes from a topology (the decoding servers' TP size and their number, from the config)
or from a TP/EP layout given directly; the GPU by the name nvidia-smi reports; the model from a folder's
config.json (the audit's DeepSeek-V4-Flash config.json when none is given). A measured output throughput
without a TPOT is turned into one as C / throughput (an upper bound: it counts the time to first token)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from bundle import modes, paths
from bundle.errors import InputError
from bundle.verify import cost_model, limits, verdict
from bundle.verify.limits import LEVER_DRAFTS

AUDIT_CONFIG = Path("bundle/images/audit/deepseek_v4_flash/config.json")
SPECULATIVE = ("none", "mtp", "mtp-light", "dspark")


@dataclass(frozen=True)
class ScoreRequest:
    gpu: str  # nvidia-smi's name
    tp: int
    concurrency: int
    input_len: int
    output_len: int
    tpot_ms: float | None = None
    output_tok_s: float | None = None
    ep: int = 1
    dp_attention: bool = False
    servers: int = 1  # servers the concurrency spreads over (dp: replicas)
    speculative: str = "none"
    draft_tokens: int | None = None  # None: what the lever means (DSpark: SGLang's default block)
    accept_length: float | None = None
    power_limit_w: float | None = None
    cuda_graphs: bool | None = None  # None: not known
    fp8_wo_a: bool = False  # SGLANG_OPT_FP8_WO_A_GEMM
    model_config: str | None = None  # a folder with config.json, or the file; None: the audit's
    label: str = "a measured figure"
    source: str | None = None
    attestation: dict | None = None  # an attestation.json's content, when the run had one
    collectives: dict | None = None


@dataclass(frozen=True)
class Scored:
    request: ScoreRequest
    tpot_ms: float
    tpot_from: str  # "TPOT" or "C / output throughput (an upper bound)"
    limit: dict  # the level's `limit` entry, as a bench writes it
    described: dict  # the run's `limits` entry
    model_notes: tuple[str, ...] = field(default_factory=tuple)

    def record(self) -> dict:
        """The figure as a one-level bench record (what the bench's table and verdict lines read)."""
        r = self.request
        metrics = {"mean_tpot_ms": round(self.tpot_ms, 3), "accept_length": r.accept_length,
                   "output_throughput": r.output_tok_s or round(1000.0 * r.concurrency / self.tpot_ms, 2)}
        return {"kind": "score", "topology": layout_name(r), "label": r.label, modes.record_key(): None,
                "config": {"input_len": r.input_len, "output_len": r.output_len},
                "limits": self.described, "levels": [{"concurrency": r.concurrency, "status": "ok",
                                                      "failed_requests": None, "metrics": metrics,
                                                      "limit": self.limit}]}

    def lines(self) -> list[str]:
        return limits.verdict_lines(self.record())

    def as_dict(self) -> dict:
        r = self.request
        return {"label": r.label, "source": r.source, "gpu": r.gpu, "layout": layout_name(r),
                "concurrency": r.concurrency, "input_len": r.input_len, "output_len": r.output_len,
                "speculative": r.speculative, "power_limit_w": r.power_limit_w, "tpot_ms": round(self.tpot_ms, 3),
                "tpot_from": self.tpot_from, "limit": self.limit}


def layout_name(r: ScoreRequest) -> str:
    return (f"TP{r.tp}" + (f"/EP{r.ep}" if r.ep > 1 else "") + (" DP-attn" if r.dp_attention else "")
            + (f" x {r.servers}" if r.servers > 1 else ""))


def _model_config(where: str | None) -> tuple[dict, dict[str, str], Path]:
    path = Path(where) if where else paths.project_root() / AUDIT_CONFIG
    folder = path if path.is_dir() else path.parent
    file = folder / "config.json" if path.is_dir() else path
    if not file.is_file():
        raise InputError(f"{file}: no such file", hint="name a model folder with a config.json, or the file itself")
    try:
        config = json.loads(file.read_text())
        return config, cost_model.safetensors_dtypes(folder), file
    except ValueError as exc:
        raise InputError(f"{file}: not JSON ({exc})", hint="give the model's config.json") from None


def _drafts(r: ScoreRequest) -> int:
    if r.draft_tokens is not None:
        return r.draft_tokens
    if r.speculative == "dspark":
        return limits.DSPARK_DEFAULT_BLOCK
    return LEVER_DRAFTS[r.speculative]


def check(r: ScoreRequest) -> None:
    """Bad input, named before anything is computed."""
    problems = []
    if r.tp < 1 or r.tp & (r.tp - 1):
        problems.append(f"--tp {r.tp}: a power of two (1, 2, 4, 8)")
    if r.ep not in (1, r.tp):
        problems.append(f"--ep {r.ep}: 1 (off) or the TP size ({r.tp}): SGLang's EP spans the TP group")
    if r.concurrency < 1 or r.input_len < 1 or r.output_len < 1:
        problems.append("--concurrency, --input-len and --output-len are positive")
    if (r.tpot_ms is None) == (r.output_tok_s is None):
        problems.append("give exactly one of --tpot-ms and --tok-s")
    elif (r.tpot_ms or r.output_tok_s or 0) <= 0 or not math.isfinite(r.tpot_ms or r.output_tok_s):
        problems.append("the measured figure is a positive number")
    if r.speculative not in SPECULATIVE:
        problems.append(f"--speculative {r.speculative}: one of {', '.join(SPECULATIVE)}")
    if r.accept_length is not None and r.accept_length <= 0:
        problems.append("--accept-length is positive")
    if problems:
        raise InputError("cannot score: " + "; ".join(problems), hint="`bundle score --help` lists every option")


def score(r: ScoreRequest) -> Scored:
    """One measured figure against the floor, with the verdict."""
    check(r)
    config, dtypes, file = _model_config(r.model_config)
    try:
        model = cost_model.model_shape(config, dtypes, fp8_wo_a=r.fp8_wo_a)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{file}: not a model's config.json ({exc})", hint="give the served model's config.json") \
            from None
    hw = cost_model.gpu(r.gpu, power_limit_w=r.power_limit_w)
    if hw is None:
        raise InputError(f"no figures for the GPU {r.gpu!r} in {cost_model.HARDWARE_FILE.name}",
                         hint="name it as nvidia-smi does; known: " + ", ".join(cost_model.known_gpus()))
    default_w = cost_model.gpu(r.gpu).power_w
    state = {"power_limit_w": r.power_limit_w, "power_default_w": default_w} if r.power_limit_w else {}
    try:
        evidence = verdict.evidence_from(r.attestation, r.collectives, state)
    except (AttributeError, TypeError, ValueError) as exc:
        raise InputError(f"the attestation given is not one `bundle launch` wrote ({type(exc).__name__})",
                         hint="give the attestation.json of a launch's run folder, or leave --attestation out") \
            from None
    if r.cuda_graphs is not None and evidence.eager is None:
        evidence = replace(evidence, eager=not r.cuda_graphs, sources=evidence.sources + ("the figure's source",))
    built = limits.Limits(model, hw, r.tp, r.servers, _drafts(r), evidence, ep=r.ep, dp_attention=r.dp_attention,
                          cuda_graphs=None if evidence.eager is None else not evidence.eager)
    tpot, tpot_from = (r.tpot_ms, "TPOT") if r.tpot_ms else (1000.0 * r.concurrency / r.output_tok_s,
                                                              "C / output throughput (an upper bound)")
    per_server = max(1, math.ceil(r.concurrency / max(r.servers, 1)))
    run = cost_model.RunShape(tp=r.tp, concurrency=per_server, input_len=r.input_len, output_len=r.output_len,
                              draft_tokens=built.draft_tokens, accept_length=r.accept_length, ep=r.ep,
                              dp_attention=r.dp_attention)
    limit = limits.judged(built, run, tpot)
    return Scored(r, tpot, tpot_from, limit, built.describe() | {"config": str(file)}, model.notes)


def ep_of(extra_args: tuple[str, ...]) -> int:
    """--ep-size / --ep in a server's extra arguments (SGLang's flags), else 1."""
    for i, arg in enumerate(extra_args):
        m = re.fullmatch(r"--(?:ep-size|ep|expert-parallel-size)(?:=(\d+))?", arg)
        if m:
            value = m.group(1) or (extra_args[i + 1] if i + 1 < len(extra_args) else "1")
            return int(value) if str(value).isdigit() else 1
    return 1


@dataclass(frozen=True)
class TopologyLayout:
    tp: int
    servers: int
    ep: int
    speculative: str
    what: str  # for the label


def topology_layout(topology: str, config: str | None) -> TopologyLayout:
    """The decoding servers of `topology` as the config deploys them: TP size, how many, EP from their
    extra arguments, the speculative lever."""
    from bundle.service.bench import decoding_roles
    from bundle.service.prepare import load
    from bundle.topology import get as topology_entry

    dep = load(config)
    entry = topology_entry(topology)
    roles = decoding_roles(dep, entry)
    first = roles[0]
    return TopologyLayout(first.tp_size, len(roles), ep_of(first.extra_args), dep.levers.speculative,
                          f"{entry.name}: {len(roles)} decoding server(s) of TP {first.tp_size}")
