"""A cost model of one decode step: what the hardware must at least do for it, and so how fast it can be.

From the served model's own config.json (its quantization config, or the dtypes its safetensors headers
declare), the run's shape (tensor-parallel size, requests decoding at once, prompt and output lengths,
speculative decoding) and the hardware's peak figures (hardware.json, one source per figure), it gives
per step and per GPU: the bytes that must be read from memory, the FLOPs, and the bytes the collectives
move over the link. A measured TPOT set against it gives MBU (model bandwidth utilisation: the bytes a
step must read / the step's time / the peak memory bandwidth), MFU (the same for FLOPs) and the
bandwidth floor of TPOT (the step's bytes at peak bandwidth; nothing that reads the weights can be
faster).

Assumptions (each moves the figures by a few percent at most, and each is named so it can be argued):
- Weights are read once per step at their stored precision: the routed experts as the checkpoint stores
  them (DeepSeek-V4-Flash: MXFP4, 4 bits plus one 8-bit scale per 32 values), the rest of a quantized
  checkpoint FP8 with one 4-byte scale per 128 x 128 block, the output head, router and embeddings BF16
  (the quantization config's ignored layers). A step reads each touched expert once, however many of the
  step's tokens chose it.
- Expert choice is uniform: of E experts with k per token, T tokens touch E * (1 - (1 - k/E)^T) distinct
  ones per layer (6 at T=1, about 44 at T=8 for 256 experts and 6 per token).
- Tensor parallelism splits every layer's large matrices over the TP ranks (column/row parallel, experts
  split along their intermediate size); the small low-rank input projections (DeepSeek-V4's wq_a and wkv),
  the indexer's key and weight projections and the router are replicated on every rank, and so is the
  latent KV cache (one KV head: every rank keeps it whole).
- Left out, under 2% of the bytes of DeepSeek-V4-Flash: norms, the hyper-connection mixers, the
  compressors' weights, attention sinks, the embedding rows looked up.
- KV read per layer: the sliding window (min(context, window) tokens), plus on compressed layers the
  entries the sparse attention picks (min(context / ratio, top-k) for the indexed ratio, all context /
  ratio entries for the others) and, for the indexer, one key per compressed entry. A config without
  `compress_ratios` is read as ratio 4 with the indexer on every layer (the heavier case). The mean
  context of a decode step is the prompt plus half the output.
- FLOPs: 2 per weight per token, plus attention's 2 x heads x (qk + v head dims) per attended entry and
  the indexer's 2 x its heads x its head dim per key; split over the TP ranks. Each matmul counts at the
  tensor rate of its narrower operand type that the GPU has (MXFP4 experts against FP8 activations run at
  the FP8 rate: SGLang 0.5.23's flashinfer_mxfp4 is MXFP4 x MXFP8), BF16 otherwise.
- Collectives: two all-reduces of the hidden state per layer under TP (after attention, after the MoE),
  BF16, ring: each GPU moves 2 (n-1)/n of the buffer over its link; the vocabulary-parallel head's
  logits are gathered once per step (FP32). Latency, which dominates these small buffers at C=1 (about
  86 all-reduces per step for 43 layers), is not in the bandwidth figure: it is why the verdict calls a
  run near at half the floor's speed.
- Speculative decoding: a verify step holds draft + 1 tokens per request; the draft head (DeepSeek's
  MTP/NEXTN or DSpark: one decoder layer) runs once per draft step and reads its layer's weights each
  time. A step yields the acceptance length in tokens per request, so TPOT's floor is the step's floor
  divided by it; with the acceptance unknown the floor is a plain step's, one token per request (an
  "effective" MBU, which speculation can take past 100%).
- On the CPU rehearsal every rank shares the host's memory bus: the bytes of all ranks are read through
  one measured bandwidth (a CPU figure, not a GPU's).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

HARDWARE_FILE = Path(__file__).resolve().with_name("hardware.json")

# Bytes per stored value, scales included (see the module's assumptions).
BYTES = {
    "fp32": 4.0, "bf16": 2.0, "fp16": 2.0,
    "fp8": 1.0 + 4.0 / (128 * 128),  # e4m3, one FP32 scale per 128 x 128 block
    "mxfp4": 0.5 + 1.0 / 32,  # e2m1 pairs in a byte, one E8M0 scale per 32 values
}
# The tensor rate a stored type runs at (the activations' type bounds it from below: FP8 for FP4 weights).
COMPUTE = {"mxfp4": "fp8", "fp8": "fp8", "bf16": "bf16", "fp16": "bf16", "fp32": "bf16"}
TORCH_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8"}
SAFETENSORS_DTYPES = {"F32": "fp32", "BF16": "bf16", "F16": "fp16", "F8_E4M3": "fp8", "U8": "mxfp4",
                      "I8": "mxfp4", "F4": "mxfp4"}
# DeepSeek-V4's cache entries (SGLang 0.5.23's dsv4 layout with the fp8_e4m3 KV cache it resolves auto
# to): the 448 "nope" dims FP8 + 64 rope dims BF16 + scales; the indexer's key: 128 FP8 + one FP32 scale.
DSV4_KV_ENTRY_BYTES = 448 + 64 * 2 + 8
DSV4_INDEX_ENTRY_BYTES = 128 + 4
INDEXED_RATIO = 4  # DeepSeek-V4's compressed layers with the indexer's top-k selection


@dataclass(frozen=True)
class WeightGroup:
    """Weights of one kind: read every step (`per_step`), or per distinct routed expert touched."""

    name: str
    params: float  # all layers
    dtype: str  # a key of BYTES
    replicated: bool = False  # every TP rank holds (and reads) all of it
    per_expert: bool = False  # params of ONE expert summed over the MoE layers


@dataclass(frozen=True)
class ModelShape:
    """What a decode step reads, from a config.json."""

    name: str
    layers: int
    hidden: int
    vocab: int
    groups: tuple[WeightGroup, ...]
    n_routed: int = 0
    top_k: int = 0
    heads: int = 1
    qk_dim: int = 0
    v_dim: int = 0
    kv_entry_bytes: float = 0.0  # one cached token, one layer
    window: int | None = None  # sliding window (None: full attention over the context)
    ratios: tuple[int, ...] = ()  # per layer compression ratio (DeepSeek-V4); () = none
    index_topk: int = 0
    index_heads: int = 0
    index_dim: int = 0
    index_entry_bytes: float = 0.0
    draft_layer_fraction: float = 0.0  # a draft head's share of one step's bytes (one layer)
    kv_replicated: bool = False  # one latent KV head (MLA): every TP rank keeps the whole cache
    notes: tuple[str, ...] = ()

    def active_params(self) -> float:
        """Parameters used per token (the routed experts counted top_k times)."""
        return sum(g.params * (self.top_k if g.per_expert else 1) for g in self.groups)


@dataclass(frozen=True)
class RunShape:
    """One bench level as the model sees it."""

    tp: int
    concurrency: int  # requests decoding at once on one server (dp: per replica)
    input_len: int
    output_len: int
    draft_tokens: int = 0  # speculative: tokens drafted per request per step (0: none)
    accept_length: float | None = None  # measured tokens per request per step; None: unknown

    @property
    def context(self) -> float:
        return self.input_len + self.output_len / 2

    @property
    def tokens(self) -> int:
        """Tokens one step processes: a verify step holds the drafts plus one per request."""
        return self.concurrency * (self.draft_tokens + 1)


@dataclass(frozen=True)
class Hardware:
    name: str
    memory_gb_s: float
    tflops: dict  # dtype -> dense TFLOPS; {} for a CPU (no MFU)
    link_gb_s: float | None
    figure: str  # "gpu" or "cpu"
    shared_memory: bool = False  # every rank reads through one memory bus (the CPU rehearsal)
    power_w: float | None = None
    sources: dict = field(default_factory=dict)
    link_source: str = "hardware.json"


@dataclass(frozen=True)
class StepCost:
    bytes_per_gpu: float  # read from memory per step, per GPU (or per host for a CPU)
    weight_bytes: float
    kv_bytes: float
    flops_per_gpu: float
    flops_by_rate: dict  # tensor rate -> FLOPs per GPU
    link_bytes_per_gpu: float
    collectives: int  # per step
    tokens: int


# ---- reading the model --------------------------------------------------------------------------------
def load_config(folder: str | Path) -> dict:
    path = Path(folder) / "config.json"
    return json.loads(path.read_text())


def safetensors_dtypes(folder: str | Path, limit_files: int = 64) -> dict[str, str]:
    """tensor name -> dtype, from the JSON headers of the folder's safetensors files (8-byte length + JSON:
    a header is read, never the weights)."""
    found: dict[str, str] = {}
    for path in sorted(Path(folder).glob("*.safetensors"))[:limit_files]:
        try:
            with path.open("rb") as fh:
                (size,) = struct.unpack("<Q", fh.read(8))
                if size > 100_000_000:
                    continue
                header = json.loads(fh.read(size))
        except (OSError, ValueError, struct.error):
            continue
        found.update({k: v.get("dtype") for k, v in header.items() if isinstance(v, dict) and "dtype" in v})
    return found


def _expert_dtype(config: dict, dtypes: dict[str, str]) -> tuple[str, str]:
    """(dtype of the routed experts, where it was read): the headers first, as SGLang's own
    probe_routed_expert_weight_dtype does, then the quantization config, then the model's published one."""
    for name, dtype in dtypes.items():
        if ".experts." in name and name.endswith("weight") and "shared" not in name:
            if dtype in SAFETENSORS_DTYPES:
                return SAFETENSORS_DTYPES[dtype], f"safetensors header ({name}: {dtype})"
    quant = config.get("quantization_config") or {}
    text = json.dumps(quant).lower()
    if "mxfp4" in text or "fp4" in text or quant.get("expert_dtype") in ("fp4", "mxfp4"):
        return "mxfp4", "quantization_config"
    if quant.get("quant_method") == "fp8" and config.get("model_type") != "deepseek_v4":
        return "fp8", "quantization_config (fp8)"
    return "mxfp4", "assumed: DeepSeek-V4-Flash's published MXFP4 experts (no header or quantization config said)"


def _dense_dtype(config: dict) -> str:
    quant = config.get("quantization_config") or {}
    if quant.get("quant_method") == "fp8" or config.get("model_type") == "deepseek_v4":
        return "fp8"
    return TORCH_DTYPES.get(str(config.get("torch_dtype") or "bfloat16"), "bf16")


def model_shape(config: dict, dtypes: dict[str, str] | None = None) -> ModelShape:
    """The shape of a config.json: DeepSeek-V4 (SGLang's DeepSeekV4Config defaults fill what it leaves
    out) or a dense Llama-like model (the CPU rehearsal's)."""
    if config.get("model_type") == "deepseek_v4":
        return _deepseek_v4(config, dtypes or {})
    return _dense(config)


def _deepseek_v4(cfg: dict, dtypes: dict[str, str]) -> ModelShape:
    # SGLang 0.5.23's DeepSeekV4Config defaults (sglang/srt/configs/deepseek_v4.py).
    g = {"num_hidden_layers": 43, "hidden_size": 4096, "vocab_size": 129280, "n_routed_experts": 256,
         "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 2048, "intermediate_size": 2048,
         "first_k_dense_replace": 0, "q_lora_rank": 1024, "num_attention_heads": 64, "qk_nope_head_dim": 448,
         "qk_rope_head_dim": 64, "v_head_dim": 512, "o_lora_rank": 1024, "o_groups": 8, "index_n_heads": 64,
         "index_head_dim": 128, "index_topk": 512, "window_size": 128, "compress_ratios": []}
    g.update({k: v for k, v in cfg.items() if k in g and v is not None})
    L, h = int(g["num_hidden_layers"]), int(g["hidden_size"])
    heads, head_dim = int(g["num_attention_heads"]), int(g["qk_nope_head_dim"]) + int(g["qk_rope_head_dim"])
    q_lora, o_lora, o_groups = int(g["q_lora_rank"]), int(g["o_lora_rank"]), int(g["o_groups"])
    moe_layers = L - int(g["first_k_dense_replace"])
    dense_layers = L - moe_layers
    expert = 3 * h * int(g["moe_intermediate_size"])
    expert_dtype, expert_source = _expert_dtype(cfg, dtypes)
    dense = _dense_dtype(cfg)
    ratios = tuple(int(r) for r in (g["compress_ratios"] or [])[:L]) or (INDEXED_RATIO,) * L
    indexed = sum(1 for r in ratios if r == INDEXED_RATIO)
    ih, idim = int(g["index_n_heads"]), int(g["index_head_dim"])
    groups = (
        WeightGroup("attention wq_a + wkv (replicated)", L * (h * q_lora + h * head_dim), dense, replicated=True),
        WeightGroup("attention wq_b, wo_a, wo_b", L * (q_lora * heads * head_dim
                                                       + (heads * head_dim // o_groups) * o_groups * o_lora
                                                       + o_groups * o_lora * h), dense),
        WeightGroup("indexer wq_b", indexed * q_lora * ih * idim, dense),
        WeightGroup("indexer wk + weights_proj (replicated)", indexed * (h * idim + h * ih), dense, replicated=True),
        WeightGroup("shared experts", moe_layers * int(g["n_shared_experts"]) * expert, dense),
        WeightGroup("dense MLP layers", dense_layers * 3 * h * int(g["intermediate_size"]), dense),
        WeightGroup("router (replicated)", moe_layers * int(g["n_routed_experts"]) * h, "bf16", replicated=True),
        WeightGroup("output head", int(g["vocab_size"]) * h, "bf16"),
        WeightGroup("routed experts", moe_layers * expert, expert_dtype, per_expert=True),
    )
    shape = ModelShape(
        name="DeepSeek-V4", layers=L, hidden=h, vocab=int(g["vocab_size"]), groups=groups,
        n_routed=int(g["n_routed_experts"]), top_k=int(g["num_experts_per_tok"]), heads=heads, qk_dim=head_dim,
        v_dim=int(g["v_head_dim"]), kv_entry_bytes=DSV4_KV_ENTRY_BYTES, window=int(g["window_size"]),
        ratios=ratios, index_topk=int(g["index_topk"]), index_heads=ih, index_dim=idim,
        index_entry_bytes=DSV4_INDEX_ENTRY_BYTES, kv_replicated=True,
        notes=(f"routed experts {expert_dtype} ({expert_source}); other weights {dense}",))
    return _with_draft(shape)


def _dense(cfg: dict) -> ModelShape:
    L, h = int(cfg["num_hidden_layers"]), int(cfg["hidden_size"])
    heads = int(cfg.get("num_attention_heads") or 1)
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or h // heads)
    dtype = _dense_dtype(cfg)
    kv_dtype = TORCH_DTYPES.get(str(cfg.get("torch_dtype") or "bfloat16"), "bf16")
    attention = h * heads * head_dim + 2 * h * kv_heads * head_dim + heads * head_dim * h
    mlp = 3 * h * int(cfg.get("intermediate_size") or 4 * h)
    groups = (WeightGroup("attention", L * attention, dtype), WeightGroup("MLP", L * mlp, dtype),
              WeightGroup("output head", int(cfg.get("vocab_size") or 0) * h, dtype))
    shape = ModelShape(name=(cfg.get("architectures") or ["dense"])[0], layers=L, hidden=h,
                       vocab=int(cfg.get("vocab_size") or 0), groups=groups, heads=heads, qk_dim=head_dim,
                       v_dim=head_dim, kv_entry_bytes=2 * kv_heads * head_dim * BYTES[kv_dtype],
                       window=cfg.get("sliding_window"), notes=(f"weights {dtype}",))
    return _with_draft(shape)


def _with_draft(shape: ModelShape) -> ModelShape:
    from dataclasses import replace

    return replace(shape, draft_layer_fraction=1.0 / max(shape.layers, 1))


# ---- one step -----------------------------------------------------------------------------------------
def distinct_experts(n_routed: int, top_k: int, tokens: int) -> float:
    if not n_routed:
        return 0.0
    return n_routed * (1.0 - (1.0 - top_k / n_routed) ** tokens)


def step_cost(model: ModelShape, run: RunShape, *, shared_memory: bool = False) -> StepCost:
    """Bytes, FLOPs and link bytes of one decode step, per GPU (per host where the ranks share memory)."""
    tp = max(run.tp, 1)
    ranks_reading = tp if shared_memory else 1  # on a CPU every rank's share goes through one bus
    T = run.tokens
    experts = distinct_experts(model.n_routed, model.top_k, T)
    weight_bytes, flops_by_rate = 0.0, {}
    for g in model.groups:
        stored = g.params * (experts if g.per_expert else 1) * BYTES[g.dtype]
        per_gpu = stored if g.replicated else stored / tp
        weight_bytes += per_gpu * ranks_reading
        used = g.params * (model.top_k if g.per_expert else 1)  # per token
        rate = COMPUTE[g.dtype]
        flops = 2.0 * used * T / (1 if g.replicated else tp)
        flops_by_rate[rate] = flops_by_rate.get(rate, 0.0) + flops * ranks_reading
    if run.draft_tokens:  # the draft head: one layer's weights per draft step (shape's assumption)
        weight_bytes *= 1.0 + model.draft_layer_fraction * run.draft_tokens
    ctx = run.context
    kv_entries, index_keys = 0.0, 0.0
    for layer in range(model.layers):
        ratio = model.ratios[layer] if model.ratios else 0
        window = min(ctx, model.window) if model.window else ctx
        entries = window
        if ratio >= 2:
            compressed = ctx / ratio
            if ratio == INDEXED_RATIO and model.index_topk:
                entries += min(compressed, model.index_topk)
                index_keys += compressed
            else:
                entries += compressed
        kv_entries += entries
    # Every request reads its own cache; a latent KV is whole on every rank, KV heads are split over them.
    kv_bytes = run.concurrency * (kv_entries * model.kv_entry_bytes + index_keys * model.index_entry_bytes)
    kv_bytes *= ranks_reading / (1 if model.kv_replicated else tp)
    attn_flops = T * (kv_entries * 2 * model.heads * (model.qk_dim + model.v_dim)
                      + index_keys * 2 * model.index_heads * model.index_dim) / tp * ranks_reading
    flops_by_rate["bf16"] = flops_by_rate.get("bf16", 0.0) + attn_flops
    collectives = 2 * model.layers + 1 if tp > 1 else 0
    ring = 2 * (tp - 1) / tp if tp > 1 else 0.0
    link = (2 * model.layers * T * model.hidden * 2 * ring + T * model.vocab * 4 * (tp - 1) / tp) if tp > 1 else 0.0
    return StepCost(bytes_per_gpu=weight_bytes + kv_bytes, weight_bytes=weight_bytes, kv_bytes=kv_bytes,
                    flops_per_gpu=sum(flops_by_rate.values()), flops_by_rate=flops_by_rate,
                    link_bytes_per_gpu=link, collectives=collectives, tokens=T)


# ---- hardware -----------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _table() -> dict:
    return json.loads(HARDWARE_FILE.read_text())["gpus"]


def known_gpus() -> list[str]:
    return sorted(_table())


def gpu(name: str, *, busbw_gb_s: float | None = None, power_limit_w: float | None = None) -> Hardware | None:
    """The figures of the GPU nvidia-smi names `name` (None when hardware.json has none); doctor's
    measured NCCL bus bandwidth replaces the link's peak where there is one."""
    entry = _table().get(name.strip())
    if entry is None:
        return None
    link, link_source = entry.get("link_gb_s"), f"hardware.json ({entry.get('link')})"
    if busbw_gb_s:
        link, link_source = busbw_gb_s, "doctor's NCCL all-reduce (bus bandwidth, measured)"
    return Hardware(name=name, memory_gb_s=float(entry["memory_gb_s"]), tflops=dict(entry["tflops"]),
                    link_gb_s=link, figure="gpu", power_w=power_limit_w or entry.get("power_w"),
                    sources=dict(entry.get("sources", {})), link_source=link_source)


def cpu(memory_gb_s: float, *, source: str = "a copy probe on this host") -> Hardware:
    return Hardware(name="CPU host", memory_gb_s=memory_gb_s, tflops={}, link_gb_s=None, figure="cpu",
                    shared_memory=True, sources={"memory_gb_s": source})


# ---- a measured level against it ----------------------------------------------------------------------
@dataclass(frozen=True)
class Score:
    figure: str  # "gpu" or "cpu"
    hardware: str
    floor_tpot_ms: float  # TPOT at peak bandwidth
    compute_tpot_ms: float | None  # TPOT at peak tensor rate (None: no tensor figures)
    link_ms: float | None  # the collectives' bytes at the link's bandwidth, per step
    measured_tpot_ms: float
    ratio: float  # measured / floor
    mbu: float  # 0..1 (more with speculation whose acceptance is unknown)
    mfu: float | None
    basis: str  # "step" or "per token (acceptance unknown)"
    bytes_per_gpu: float
    flops_per_gpu: float
    tokens_per_step: int

    def as_dict(self) -> dict:
        return {"figure": self.figure, "hardware": self.hardware, "floor_tpot_ms": round(self.floor_tpot_ms, 4),
                "compute_tpot_ms": None if self.compute_tpot_ms is None else round(self.compute_tpot_ms, 4),
                "link_ms": None if self.link_ms is None else round(self.link_ms, 4),
                "measured_tpot_ms": round(self.measured_tpot_ms, 3), "ratio": round(self.ratio, 2),
                "mbu": round(self.mbu, 6), "mfu": None if self.mfu is None else round(self.mfu, 5),
                "basis": self.basis, "bytes_per_gpu": round(self.bytes_per_gpu),
                "flops_per_gpu": round(self.flops_per_gpu), "tokens_per_step": self.tokens_per_step}


def score(model: ModelShape, run: RunShape, hw: Hardware, measured_tpot_ms: float) -> Score:
    """A measured mean TPOT against the step's floors."""
    speculative = run.draft_tokens > 0
    known = run.accept_length if speculative and run.accept_length and run.accept_length > 0 else None
    # Acceptance unknown: the floor of a plain step, one token per request (effective MBU).
    costed = run if (known or not speculative) else RunShape(run.tp, run.concurrency, run.input_len, run.output_len)
    cost = step_cost(model, costed, shared_memory=hw.shared_memory)
    per_step_tokens = known or 1.0
    floor_step_s = cost.bytes_per_gpu / (hw.memory_gb_s * 1e9)
    floor_ms = floor_step_s / per_step_tokens * 1000
    compute_ms = None
    if hw.tflops:
        seconds = 0.0
        for rate, flops in cost.flops_by_rate.items():
            peak = hw.tflops.get(rate) or hw.tflops.get("bf16")
            seconds += flops / (peak * 1e12)
        compute_ms = seconds / per_step_tokens * 1000
    link_ms = cost.link_bytes_per_gpu / (hw.link_gb_s * 1e9) * 1000 if hw.link_gb_s and cost.link_bytes_per_gpu else None
    ratio = measured_tpot_ms / floor_ms if floor_ms > 0 else math.inf
    return Score(figure=hw.figure, hardware=hw.name, floor_tpot_ms=floor_ms, compute_tpot_ms=compute_ms,
                 link_ms=link_ms, measured_tpot_ms=measured_tpot_ms, ratio=ratio,
                 mbu=1.0 / ratio if ratio else 0.0,
                 mfu=(compute_ms / measured_tpot_ms) if compute_ms is not None and measured_tpot_ms else None,
                 basis="step" if (known or not speculative) else "per token (acceptance unknown)",
                 bytes_per_gpu=cost.bytes_per_gpu, flops_per_gpu=cost.flops_per_gpu, tokens_per_step=cost.tokens)
