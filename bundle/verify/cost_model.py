"""A cost model of one decode step: what the hardware must at least do for it, and so how fast it can be.

From the served model's own config.json (its quantization config, or the dtypes its safetensors headers
declare), the run's shape (the rank layout: tensor-parallel size and expert parallelism; requests decoding
at once, prompt and output lengths, speculative decoding) and the hardware's peak figures (hardware.json,
one source per figure), it gives per step and per GPU: the bytes that must be read from memory, by weight
class, the FLOPs, and the collectives the step makes. A measured TPOT set against it gives MBU (model
bandwidth utilisation: the bytes a step must read / the step's time / the peak memory bandwidth), MFU
(the same for FLOPs) and the floor of TPOT (floor_parts: the larger of the bandwidth and compute times, plus
the collectives' latency and, without CUDA graphs, the kernel launches, which nothing overlaps).

The weight classes are what the pinned SGLang 0.5.23's DeepSeek-V4 model holds on one rank
(sglang/srt/models/deepseek_v4.py and its layers), in the dtypes it keeps on sm_120, and this closed form
is held within 3% per class and per layout to the census of that model built for real
(census_probe.py, recorded in tests/data/census/; tests/test_census.py):
- routed experts as the checkpoint stores them (MXFP4: 4 bits plus one 8-bit scale per 32 values), split
  over the experts' intermediate size under TP, or n_routed / EP whole experts per rank under EP; a step
  reads each touched expert once, however many of its tokens chose it;
- the attention's wq_b and wo_b FP8 (one 4-byte scale per 128 x 128 block) and split over the attention's
  TP ranks; its wo_a BF16 and split: SGLang dequantizes the checkpoint's FP8 wo_a at load unless
  SGLANG_OPT_FP8_WO_A_GEMM (off on sm_120: its GEMM is DeepGEMM's); wq_a and wkv FP8, replicated;
- the compressors (attention's on every compressed layer, the indexer's on every ratio-4 layer) BF16 with
  FP32 position biases and norms, replicated and run every step; the indexer's wq_b FP8 and its
  weights_proj BF16, both replicated ("duplicate indexer on all TP ranks"); V4's indexer has no wk;
- the hyper-connection mixers (hc_mult copies of the residual stream, mixed before and after each
  sublayer) FP32 and replicated, norms and attention sinks as built;
- the shared expert FP8, split over TP; the router BF16 (plus an FP32 score bias on the layers not routed
  by hash), replicated; the output head BF16, split over the vocabulary; the embedding BF16 split the same
  way, but a step reads only the rows of its tokens.
- Expert choice is uniform: of E experts with k per token, T tokens touch E * (1 - (1 - k/E)^T) distinct
  ones per layer (6 at T=1). Under EP the busiest rank sets the step's time: the expected largest count
  among the ranks, each holding E / EP experts, each touched independently with that probability (2.8 at
  T=1 for EP4, against a mean of 1.5).
- KV read per layer from the per-layer `compress_ratios`: the sliding window (min(context, window)
  tokens) on every layer; on a ratio-4 layer the top-k compressed entries the indexer picks
  (min(context / 4, top-k)) and, for the indexer, one key per compressed entry; on a heavily compressed
  layer (ratio 128) every compressed entry; a window-only layer (ratio 0) nothing more. A config without
  `compress_ratios` is read as ratio 4 with the indexer on every layer (the heavier case). The mean
  context of a decode step is the prompt plus half the output.
- FLOPs: 2 per weight per token, plus attention's 2 x heads x (qk + v head dims) per attended entry and
  the indexer's 2 x its heads x its head dim per key; split over the TP ranks. Each matmul counts at the
  tensor rate of its narrower operand type that the GPU has (MXFP4 experts against FP8 activations run at
  the FP8 rate: SGLang 0.5.23's flashinfer_mxfp4 is MXFP4 x MXFP8), BF16 otherwise.
- Collectives under TP: two all-reduces of the hidden state per layer (after attention's wo_b, after the
  MoE), BF16, plus the vocabulary-parallel embedding's all-reduce, and the output head's logits gathered
  once per step (FP32). Their bytes at the link's bandwidth and, for each, a small message's latency
  (collective_latency.py; the floor's parts: floor_parts below).
- The sampler: every TP rank samples from the whole vocabulary's logits, gathered and cast to FP32
  (sglang/srt/layers/logits_processor.py, the next-token logits buffer), and reads them at least once
  (sglang/srt/layers/sampler.py, Sampler.forward: greedy's argmax reads them once; temperature, softmax
  and top-k/top-p sampling read them again): tokens x vocabulary x 4 bytes, its own part of the floor.
- Speculative decoding: a verify step holds draft + 1 tokens per request; the draft (draft_shape: SGLang's
  own MTP/NEXTN draft, one window-only decoder layer with its routed MoE, e_proj/h_proj and the hc head,
  held to its census like the model) reads its weights once per draft pass, the output head it shares
  with the model included: EAGLE with top-k 1 makes one pass per drafted token (mtp 3, mtp-light 1), a
  DSpark step one pass (its draft counted as the MTP draft's shape). A step yields the acceptance length
  in tokens per request, so TPOT's floor is the step's floor
  divided by it; with the acceptance unknown the floor is a plain step's, one token per request (an
  "effective" MBU, which speculation can take past 100%).
- On the CPU engine every rank shares the host's memory bus: the bytes of all ranks are read through
  one measured bandwidth (a CPU figure, not a GPU's).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from bundle.verify import collective_latency
from bundle.verify import kernel_families as kf
from bundle.verify.collective_latency import CollectiveLatency

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
SAMPLER_LOGIT_BYTES = 4  # the logits the sampler reads are FP32 (the module's assumptions)

# How a class is read by a decode step (the census's words): whole, per routed expert touched, or only
# the rows its tokens index (an embedding, a rotary or hash-routing table).
EVERY_STEP, PER_EXPERT, ROWS = "every step", "per touched expert", "rows indexed"
# How a class is laid out over the ranks: whole on each, split over the attention's TP ranks, split over
# the vocabulary (the TP ranks), or the routed experts' own layout (EP whole experts, else TP slices).
REPLICATED, SPLIT, VOCAB, EXPERTS = "replicated", "split", "vocabulary", "experts"


@dataclass(frozen=True)
class Layout:
    """How one server's ranks share the model: TP ranks, expert parallelism (EP = 1: off; EP = TP: every
    rank holds whole experts), DP attention (the attention replicated per DP rank, its TP narrowed)."""

    tp: int = 1
    ep: int = 1
    dp_attention: bool = False

    @property
    def attn_tp(self) -> int:
        return 1 if self.dp_attention else self.tp

    @property
    def moe_tp(self) -> int:
        """The slices each expert is cut into (SGLang's moe_tp_size = tp / ep)."""
        return max(self.tp // max(self.ep, 1), 1)

    def name(self) -> str:
        return f"TP{self.tp}" + (f"/EP{self.ep}" if self.ep > 1 else "") + (" DP-attn" if self.dp_attention else "")


@dataclass(frozen=True)
class WeightGroup:
    """One weight class: `held(layout)` its bytes on one rank; read whole every step, per routed expert
    touched (`held` is then all the rank's experts), or only by the rows a step indexes."""

    name: str
    bytes_at_tp1: float  # all layers, whole (every expert, every vocabulary row)
    dtype: str  # the dominant stored type (a key of BYTES): its tensor rate
    split: str = SPLIT  # REPLICATED, SPLIT, VOCAB or EXPERTS
    read: str = EVERY_STEP
    params: float = 0.0  # parameters used per token (FLOPs; routed experts: ONE expert over the layers)
    row_bytes: float = 0.0  # ROWS: bytes of one row (one token's read)
    family: str = kf.DENSE_GEMM  # the kernel family that reads it in a profile (kernel_families.py)

    def held(self, layout: Layout) -> float:
        if self.split == REPLICATED:
            return self.bytes_at_tp1
        if self.split == SPLIT:
            return self.bytes_at_tp1 / layout.attn_tp
        if self.split == VOCAB:
            return self.bytes_at_tp1 / (1 if layout.dp_attention else layout.tp)
        # EXPERTS: EP ranks hold E / EP whole experts; the experts' intermediate is cut tp / ep ways.
        return self.bytes_at_tp1 / max(layout.ep, 1) / layout.moe_tp

    @property
    def replicated(self) -> bool:
        return self.split == REPLICATED


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
    draft_layer_fraction: float = 0.0  # a draft head's share of one step's bytes (one layer): without `draft`
    draft: ModelShape | None = None  # the speculative draft SGLang builds beside the model (draft_shape)
    kv_replicated: bool = False  # one latent KV head (MLA): every TP rank keeps the whole cache
    all_reduces_per_layer: int = 2  # under TP: after the attention's output projection, after the MLP/MoE
    notes: tuple[str, ...] = ()

    def active_params(self) -> float:
        """Parameters used per token (the routed experts counted top_k times)."""
        return sum(g.params * (self.top_k if g.read == PER_EXPERT else 1) for g in self.groups)

    def held(self, layout: Layout) -> dict[str, float]:
        """Bytes per weight class on one rank of `layout` (what the census counts)."""
        return {g.name: g.held(layout) for g in self.groups}


@dataclass(frozen=True)
class RunShape:
    """One bench level as the model sees it."""

    tp: int
    concurrency: int  # requests decoding at once on one server (dp: per replica)
    input_len: int
    output_len: int
    draft_tokens: int = 0  # speculative: tokens drafted per request per step (0: none)
    draft_passes: int | None = None  # the draft's forward passes per step; None: draft_tokens (draft_passes_of)
    accept_length: float | None = None  # measured tokens per request per step; None: unknown
    ep: int = 1  # expert parallelism (1: off)
    dp_attention: bool = False

    @property
    def layout(self) -> Layout:
        return Layout(self.tp, self.ep, self.dp_attention)

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
    shared_memory: bool = False  # every rank reads through one memory bus (the CPU engine)
    power_w: float | None = None
    sources: dict = field(default_factory=dict)
    link_source: str = "hardware.json"


@dataclass(frozen=True)
class Collective:
    """One kind of collective a step makes: how many, and each one's message (bytes per rank)."""

    what: str
    count: int
    message_bytes: float


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
    bytes_by_class: dict = field(default_factory=dict)  # weight class -> bytes read per step per GPU
    experts_read: float = 0.0  # distinct routed experts read per MoE layer on the busiest rank
    collective_kinds: tuple[Collective, ...] = ()
    sampler_bytes: float = 0.0  # the sampler's one read of the FP32 logits
    draft_bytes: float = 0.0  # of weight_bytes: the draft's passes (draft_read), per GPU


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
    # SGLANG_DSV4_FP4_EXPERTS defaults to on in SGLang 0.5.23 (environ.py) when no header says otherwise.
    return "mxfp4", "assumed: DeepSeek-V4-Flash's published MXFP4 experts (no header or quantization config said)"


def _dense_dtype(config: dict) -> str:
    quant = config.get("quantization_config") or {}
    if quant.get("quant_method") == "fp8" or config.get("model_type") == "deepseek_v4":
        return "fp8"
    return TORCH_DTYPES.get(str(config.get("torch_dtype") or "bfloat16"), "bf16")


def model_shape(config: dict, dtypes: dict[str, str] | None = None, *, fp8_wo_a: bool = False) -> ModelShape:
    """The shape of a config.json: DeepSeek-V4 (SGLang's DeepSeekV4Config defaults fill what it leaves
    out) or a dense Llama-like model (the CPU engine's). `fp8_wo_a`: SGLANG_OPT_FP8_WO_A_GEMM set."""
    if config.get("model_type") == "deepseek_v4":
        shape = _deepseek_v4(config, dtypes or {}, fp8_wo_a=fp8_wo_a)
        return replace(shape, draft=draft_shape(config, dtypes, fp8_wo_a=fp8_wo_a))
    return _dense(config)


# SGLang 0.5.23's DeepSeekV4Config defaults (sglang/srt/configs/deepseek_v4.py).
DSV4_DEFAULTS = {
    "num_hidden_layers": 43, "hidden_size": 4096, "vocab_size": 129280, "n_routed_experts": 256,
    "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 2048, "intermediate_size": 2048,
    "first_k_dense_replace": 0, "q_lora_rank": 1024, "num_attention_heads": 64, "qk_nope_head_dim": 448,
    "qk_rope_head_dim": 64, "v_head_dim": 512, "o_lora_rank": 1024, "o_groups": 8, "index_n_heads": 64,
    "index_head_dim": 128, "index_topk": 512, "window_size": 128, "compress_ratios": [], "hc_mult": 4}


def _fp8(rows: int, cols: int, split_rows: int = 1, split_cols: int = 1) -> float:
    """Bytes of an FP8 matrix (block-quantized, one FP32 scale per 128 x 128 block) cut `split_*` ways,
    times the cuts: the whole matrix as the ranks hold it together (scales rounded up per rank)."""
    r, c = rows // split_rows, cols // split_cols
    return split_rows * split_cols * (r * c + 4 * math.ceil(r / 128) * math.ceil(c / 128))


def _deepseek_v4(cfg: dict, dtypes: dict[str, str], *, fp8_wo_a: bool = False) -> ModelShape:
    g = dict(DSV4_DEFAULTS)
    g.update({k: v for k, v in cfg.items() if k in g and v is not None})
    L, h = int(g["num_hidden_layers"]), int(g["hidden_size"])
    heads, head_dim = int(g["num_attention_heads"]), int(g["qk_nope_head_dim"]) + int(g["qk_rope_head_dim"])
    q_lora, o_lora, o_groups = int(g["q_lora_rank"]), int(g["o_lora_rank"]), int(g["o_groups"])
    moe_layers = L - int(g["first_k_dense_replace"])
    dense_layers = L - moe_layers
    n_routed, inter, vocab = int(g["n_routed_experts"]), int(g["moe_intermediate_size"]), int(g["vocab_size"])
    expert_params = 3 * h * inter
    expert_dtype, expert_source = _expert_dtype(cfg, dtypes)
    dense = _dense_dtype(cfg)

    def stored(rows: int, cols: int, dtype: str) -> float:
        return _fp8(rows, cols) if dtype == "fp8" else rows * cols * BYTES[dtype]

    ratios = tuple(int(r) for r in (g["compress_ratios"] or [])[:L]) or (INDEXED_RATIO,) * L
    indexed = sum(1 for r in ratios if r == INDEXED_RATIO)
    compressed = [r for r in ratios if r]
    ih, idim = int(g["index_n_heads"]), int(g["index_head_dim"])
    hc = int(g["hc_mult"])
    mix = (2 + hc) * hc  # the hyper-connection mixers' rows (deepseek_v4.make_hc_mixing_params)

    def compressor(ratio: int, dim: int) -> float:
        """wkv_gate BF16 (dim x 2 x coff x head dim; coff 2 where the windows overlap, ratio 4), the
        position bias `ape` (ratio x coff x head dim) and the norm FP32."""
        coff = 2 if ratio == INDEXED_RATIO else 1
        return h * 2 * coff * dim * 2 + ratio * coff * dim * 4 + dim * 4

    wo_a_dtype = "fp8" if fp8_wo_a else "bf16"
    wo_a_in, wo_a_out = heads * head_dim // o_groups, o_groups * o_lora
    # BF16 norms (two per layer, the q and kv norms, the final one), FP32 attention sinks, the FP8 KV
    # cache's two FP32 scales per layer
    norms = L * (2 * h + q_lora + head_dim) * 2 + h * 2 + L * heads * 4 + L * 2 * 4
    groups = (
        WeightGroup("attention wq_a + wkv", L * (stored(q_lora, h, dense) + stored(head_dim, h, dense)), dense,
                    REPLICATED, params=L * h * (q_lora + head_dim)),
        WeightGroup("attention wq_b", L * stored(heads * head_dim, q_lora, dense), dense,
                    params=L * q_lora * heads * head_dim),
        WeightGroup("attention wo_a", L * stored(wo_a_out, wo_a_in, wo_a_dtype), wo_a_dtype,
                    params=L * wo_a_out * wo_a_in),  # grouped: each head group meets its own o_lora rows
        WeightGroup("attention wo_b", L * stored(h, wo_a_out, dense), dense, params=L * wo_a_out * h),
        WeightGroup("attention compressor", sum(compressor(r, head_dim) for r in compressed), "bf16", REPLICATED,
                    params=sum(h * 2 * (2 if r == INDEXED_RATIO else 1) * head_dim for r in compressed)),
        WeightGroup("indexer compressor", indexed * compressor(INDEXED_RATIO, idim), "bf16", REPLICATED,
                    params=indexed * h * 4 * idim),
        WeightGroup("indexer wq_b", indexed * stored(ih * idim, q_lora, dense), dense, REPLICATED,
                    params=indexed * q_lora * ih * idim),
        WeightGroup("indexer weights_proj", indexed * h * ih * 2, "bf16", REPLICATED, params=indexed * h * ih),
        WeightGroup("hyper-connection mixers", (L * 2 * (mix * hc * h + mix + 3) + hc * hc * h + hc + 1) * 4,
                    "fp32", REPLICATED, params=L * 2 * mix * hc * h + hc * hc * h),
        WeightGroup("norms and sinks", norms, "bf16", REPLICATED, family=kf.ELEMENTWISE),
        WeightGroup("router", moe_layers * n_routed * (h * 2 + 4), "bf16",  # + the FP32 score bias, every layer
                    REPLICATED, params=moe_layers * n_routed * h, family=kf.MOE),
        WeightGroup("shared experts", moe_layers * int(g["n_shared_experts"]) * (
            _fp8(2 * inter, h) + _fp8(h, inter)), dense, params=moe_layers * int(g["n_shared_experts"]) * expert_params,
                    family=kf.MOE),
        WeightGroup("dense MLP layers", dense_layers * (_fp8(2 * int(g["intermediate_size"]), h)
                                                        + _fp8(h, int(g["intermediate_size"]))), dense,
                    params=dense_layers * 3 * h * int(g["intermediate_size"])),
        WeightGroup("output head", vocab * h * 2, "bf16", VOCAB, params=vocab * h),
        WeightGroup("embedding", vocab * h * 2, "bf16", VOCAB, read=ROWS, row_bytes=h * 2, family=kf.ELEMENTWISE),
        WeightGroup("routed experts", moe_layers * n_routed * expert_params * BYTES[expert_dtype], expert_dtype,
                    EXPERTS, read=PER_EXPERT, params=moe_layers * expert_params, family=kf.MOE),
    )
    shape = ModelShape(
        name="DeepSeek-V4", layers=L, hidden=h, vocab=vocab, groups=tuple(gr for gr in groups if gr.bytes_at_tp1),
        n_routed=n_routed, top_k=int(g["num_experts_per_tok"]), heads=heads, qk_dim=head_dim,
        v_dim=int(g["v_head_dim"]), kv_entry_bytes=DSV4_KV_ENTRY_BYTES, window=int(g["window_size"]),
        ratios=ratios, index_topk=int(g["index_topk"]), index_heads=ih, index_dim=idim,
        index_entry_bytes=DSV4_INDEX_ENTRY_BYTES, kv_replicated=True,
        notes=(f"routed experts {expert_dtype} ({expert_source}); wo_a {wo_a_dtype} "
               f"({'SGLANG_OPT_FP8_WO_A_GEMM' if fp8_wo_a else 'dequantized at load: SGLANG_OPT_FP8_WO_A_GEMM off'}); "
               f"other projections {dense}; compressors, indexer wq_b and mixers replicated",))
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
    vocab = int(cfg.get("vocab_size") or 0)
    groups = (WeightGroup("attention", L * attention * BYTES[dtype], dtype, params=L * attention),
              WeightGroup("MLP", L * mlp * BYTES[dtype], dtype, params=L * mlp),
              WeightGroup("output head", vocab * h * BYTES[dtype], dtype, VOCAB, params=vocab * h))
    shape = ModelShape(name=(cfg.get("architectures") or ["dense"])[0], layers=L, hidden=h,
                       vocab=vocab, groups=groups, heads=heads, qk_dim=head_dim,
                       v_dim=head_dim, kv_entry_bytes=2 * kv_heads * head_dim * BYTES[kv_dtype],
                       window=cfg.get("sliding_window"), notes=(f"weights {dtype}",))
    return _with_draft(shape)


def _with_draft(shape: ModelShape) -> ModelShape:
    return replace(shape, draft_layer_fraction=1.0 / max(shape.layers, 1))


# ---- the speculative draft ----------------------------------------------------------------------------
# What EAGLE's draft worker takes from the model at load (set_embed_and_head): held once, by the model,
# but read by every draft pass (the head whole, the embedding by its rows).
DRAFT_SHARED = ("embedding", "output head")


def draft_shape(config: dict, dtypes: dict[str, str] | None = None, *, fp8_wo_a: bool = False) -> ModelShape | None:
    """The MTP draft SGLang 0.5.23 builds for DeepSeek-V4 (`DeepseekV4ForCausalLMNextN`, what levers.speculative
    mtp / mtp-light run; held to its census, tests/data/census/): one decoder layer as the model's, built with
    compress ratio 0 (window only: no compressor, no indexer) and a routed MoE; e_proj and h_proj (FP8,
    replicated) projecting the token's embedding and the model's hidden state; the hyper-connection head and
    three norms (enorm, hnorm, the head's); its own embedding and output head, which the worker replaces
    with the model's (DRAFT_SHARED). None for a model without one here."""
    if config.get("model_type") != "deepseek_v4":
        return None
    one = dict(config, num_hidden_layers=1, compress_ratios=[0], first_k_dense_replace=0)
    shape = _deepseek_v4(one, dtypes or {}, fp8_wo_a=fp8_wo_a)
    h, dense = shape.hidden, _dense_dtype(config)
    groups = [replace(g, bytes_at_tp1=g.bytes_at_tp1 + 2 * h * 2) if g.name == "norms and sinks" else g
              for g in shape.groups]  # enorm and hnorm beside the head's norm
    groups.append(WeightGroup("draft e_proj + h_proj", 2 * _fp8(h, h), dense, REPLICATED, params=2 * h * h))
    return replace(shape, name="DeepSeek-V4 MTP draft", groups=tuple(groups), draft_layer_fraction=0.0,
                   notes=shape.notes + (f"embedding and output head shared with the model ({', '.join(DRAFT_SHARED)})",))


def draft_passes_of(run: RunShape) -> int:
    """The draft's forward passes in one step. EAGLE with top-k 1 (mtp: 3 steps; mtp-light: 1) drafts one
    token per pass: steps - 1 passes in the draft loop and one draft-extend over the verified tokens, so
    as many passes as drafted tokens, unless the run says otherwise (DSpark drafts its block in one)."""
    if not run.draft_tokens:
        return 0
    return run.draft_passes if run.draft_passes is not None else run.draft_tokens


def draft_read(draft: ModelShape, run: RunShape, *, shared_memory: bool = False) -> tuple[float, dict]:
    """(bytes, FLOPs by tensor rate) the draft's passes in one step read and do, per GPU: each inner pass
    one token per request, the last (the draft-extend) every verified token; the draft's window KV each."""
    passes = draft_passes_of(run)
    if not passes:
        return 0.0, {}
    plain = replace(run, draft_tokens=0, draft_passes=None)
    inner = step_cost(draft, plain, shared_memory=shared_memory)
    extend = step_cost(draft, replace(plain, concurrency=run.tokens), shared_memory=shared_memory)
    flops = {rate: inner.flops_by_rate.get(rate, 0.0) * (passes - 1) + extend.flops_by_rate.get(rate, 0.0)
             for rate in set(inner.flops_by_rate) | set(extend.flops_by_rate)}
    return inner.bytes_per_gpu * (passes - 1) + extend.bytes_per_gpu, flops


# ---- one step -----------------------------------------------------------------------------------------
def distinct_experts(n_routed: int, top_k: int, tokens: int) -> float:
    if not n_routed:
        return 0.0
    return n_routed * (1.0 - (1.0 - top_k / n_routed) ** tokens)


def busiest_rank_experts(n_routed: int, top_k: int, tokens: int, ep: int) -> float:
    """Expected distinct experts the busiest of `ep` ranks reads per MoE layer (each holds n_routed / ep;
    each expert touched with probability 1 - (1 - k/E)^T, independently: the largest of `ep` binomial
    counts, E[max] = sum over m of 1 - F(m - 1)^ep). ep 1: the plain distinct count."""
    if not n_routed:
        return 0.0
    if ep <= 1:
        return distinct_experts(n_routed, top_k, tokens)
    n, p = n_routed // ep, 1.0 - (1.0 - top_k / n_routed) ** tokens
    expected, cdf = 0.0, 0.0
    for m in range(n + 1):
        expected += 1.0 - cdf**ep if m else 0.0  # P(max >= m) = 1 - F(m - 1)^ep
        cdf += math.comb(n, m) * p**m * (1 - p) ** (n - m)
    return expected


def collectives_of(model: ModelShape, run: RunShape) -> tuple[Collective, ...]:
    """The collectives one step makes under TP: the all-reduces of every layer (after the attention's
    output projection and after the MoE), the vocabulary-parallel embedding's, and the logits' gather."""
    layout = run.layout
    if layout.tp <= 1:
        return ()
    T = run.tokens
    hidden = T * model.hidden * 2  # BF16
    kinds = [Collective("all-reduce (layers)", model.all_reduces_per_layer * model.layers, hidden)]
    if not layout.dp_attention:
        kinds.append(Collective("all-reduce (embedding)", 1, hidden))
    kinds.append(Collective("all-gather (logits)", 1, T * model.vocab / layout.tp * 4))  # FP32, each rank's slice
    return tuple(kinds)


def step_cost(model: ModelShape, run: RunShape, *, shared_memory: bool = False) -> StepCost:
    """Bytes (by weight class), FLOPs and collectives of one decode step, per GPU (per host where the
    ranks share memory). Under EP, the busiest rank's."""
    layout = run.layout
    tp = max(run.tp, 1)
    ranks_reading = tp if shared_memory else 1  # on a CPU every rank's share goes through one bus
    T = run.tokens
    experts = busiest_rank_experts(model.n_routed, model.top_k, T, layout.ep)
    by_class: dict[str, float] = {}
    flops_by_rate: dict[str, float] = {}
    for g in model.groups:
        held = g.held(layout)
        if g.read == PER_EXPERT:
            local = model.n_routed / max(layout.ep, 1)
            read = held / local * experts if local else 0.0
        elif g.read == ROWS:
            read = min(T * g.row_bytes, held)
        else:
            read = held
        by_class[g.name] = read * ranks_reading
        if g.params:
            used = g.params * (model.top_k if g.read == PER_EXPERT else 1)  # per token, all ranks
            share = held / g.bytes_at_tp1 if g.read != PER_EXPERT else 1.0 / tp
            rate = COMPUTE[g.dtype]
            flops_by_rate[rate] = flops_by_rate.get(rate, 0.0) + 2.0 * used * T * share * ranks_reading
    weight_bytes = sum(by_class.values())
    drafted = 0.0
    if run.draft_tokens and model.draft is not None:  # the draft's own weights, each of its passes
        drafted, draft_flops = draft_read(model.draft, run, shared_memory=shared_memory)
        for rate, f in draft_flops.items():
            flops_by_rate[rate] = flops_by_rate.get(rate, 0.0) + f
    elif run.draft_tokens:  # no draft shape: one layer's weights per draft step
        drafted = weight_bytes * model.draft_layer_fraction * run.draft_tokens
    weight_bytes += drafted
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
                      + index_keys * 2 * model.index_heads * model.index_dim) / layout.attn_tp * ranks_reading
    flops_by_rate["bf16"] = flops_by_rate.get("bf16", 0.0) + attn_flops
    sampler_bytes = T * model.vocab * SAMPLER_LOGIT_BYTES * ranks_reading  # every rank samples the whole vocabulary
    kinds = collectives_of(model, run)
    ring = 2 * (tp - 1) / tp if tp > 1 else 0.0
    link = sum(k.count * k.message_bytes * (ring if k.what.startswith("all-reduce") else (tp - 1))
               for k in kinds)
    return StepCost(bytes_per_gpu=weight_bytes + kv_bytes + sampler_bytes, weight_bytes=weight_bytes,
                    kv_bytes=kv_bytes, flops_per_gpu=sum(flops_by_rate.values()), flops_by_rate=flops_by_rate,
                    link_bytes_per_gpu=link, collectives=sum(k.count for k in kinds), tokens=T,
                    bytes_by_class=by_class, experts_read=experts, collective_kinds=kinds,
                    sampler_bytes=sampler_bytes, draft_bytes=drafted)


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
# Without CUDA graphs every kernel is launched from the host: an empty launch costs about 4 us (measured on
# the lent H200, CONTEXT.md), and a DeepSeek-V4 decoder layer launches about 40 kernels in eager decode
# (hyper-connection mix and norm x 2, the attention's 5 projections, rope, cache write, compressors,
# indexer (projections, quantisation, logits, top-k), sparse attention, router, top-k, MoE quantisation
# and GEMMs, shared expert, two all-reduces): an estimate, named as one in the floor's parts.
LAUNCH_S = 4e-6
KERNELS_PER_LAYER = 40


def _ms(value: float) -> str:
    if value >= 0.1:
        return f"{value:.2f} ms"
    return f"{value:.3f} ms" if value >= 0.001 or not value else f"{value:.1g} ms"  # the sampler: 0.0003 ms


@dataclass(frozen=True)
class FloorParts:
    """The floor of one step, by what takes the time (ms per step, not per token)."""

    weights_ms: float
    kv_ms: float
    compute_ms: float | None
    collectives_ms: float
    collectives: int
    collective_each_us: float  # the mean, for the line "(87 x 16 us)"
    latency_source: str | None
    launches_ms: float
    launches: int
    # The floor's share of each kernel family (kernel_families.py), ms per step, adding up to step_ms: a
    # profile's per-family table is set against it (profile_floor.py).
    families: dict = field(default_factory=dict)
    sampler_ms: float = 0.0  # the sampler's read of the logits

    @property
    def bandwidth_ms(self) -> float:
        return self.weights_ms + self.kv_ms + self.sampler_ms

    @property
    def step_ms(self) -> float:
        return max(self.bandwidth_ms, self.compute_ms or 0.0) + self.collectives_ms + self.launches_ms

    def binding(self) -> str:
        """What sets the floor most: the largest part."""
        parts = {"weights": self.weights_ms, "KV cache": self.kv_ms, "sampler": self.sampler_ms,
                 "compute": self.compute_ms or 0.0,
                 "collectives": self.collectives_ms, "kernel launches": self.launches_ms}
        return max(parts, key=parts.get)

    def line(self) -> str:
        text = f"weights {_ms(self.weights_ms)}, KV {_ms(self.kv_ms)}"
        if self.sampler_ms:
            text += f", sampler {_ms(self.sampler_ms)}"
        if self.compute_ms is not None:
            text += f", compute {_ms(self.compute_ms)}"
        if self.collectives:
            text += (f", collectives {_ms(self.collectives_ms)} ({self.collectives} x "
                     f"{self.collective_each_us:.0f} us)")
        if self.launches:
            text += f", kernel launches {_ms(self.launches_ms)} ({self.launches} x {LAUNCH_S * 1e6:.0f} us, no CUDA graphs)"
        return text

    def as_dict(self) -> dict:
        return {"weights_ms": round(self.weights_ms, 4), "kv_ms": round(self.kv_ms, 4),
                "sampler_ms": round(self.sampler_ms, 6),
                "compute_ms": None if self.compute_ms is None else round(self.compute_ms, 4),
                "collectives_ms": round(self.collectives_ms, 4), "collectives": self.collectives,
                "collective_each_us": round(self.collective_each_us, 2), "latency_source": self.latency_source,
                "launches_ms": round(self.launches_ms, 4), "launches": self.launches,
                "step_ms": round(self.step_ms, 4), "binding": self.binding(), "line": self.line(),
                "families": {name: round(ms, 6) for name, ms in self.families.items()}}


@dataclass(frozen=True)
class Score:
    figure: str  # "gpu" or "cpu"
    hardware: str
    floor_tpot_ms: float  # TPOT at the floor: bandwidth or compute, plus what cannot overlap, per token
    bandwidth_tpot_ms: float  # the bytes alone at peak bandwidth, per token (MBU's denominator)
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
    parts: FloorParts | None = None
    layout: str = ""
    experts_read: float = 0.0

    @property
    def floor_share(self) -> float:
        """floor / measured: 1.0 at the floor."""
        return 1.0 / self.ratio if self.ratio else 0.0

    def as_dict(self) -> dict:
        return {"figure": self.figure, "hardware": self.hardware, "floor_tpot_ms": round(self.floor_tpot_ms, 4),
                "bandwidth_tpot_ms": round(self.bandwidth_tpot_ms, 4),
                "compute_tpot_ms": None if self.compute_tpot_ms is None else round(self.compute_tpot_ms, 4),
                "link_ms": None if self.link_ms is None else round(self.link_ms, 4),
                "measured_tpot_ms": round(self.measured_tpot_ms, 3), "ratio": round(self.ratio, 2),
                "floor_share": round(self.floor_share, 4),
                "mbu": round(self.mbu, 6), "mfu": None if self.mfu is None else round(self.mfu, 5),
                "basis": self.basis, "bytes_per_gpu": round(self.bytes_per_gpu),
                "flops_per_gpu": round(self.flops_per_gpu), "tokens_per_step": self.tokens_per_step,
                "layout": self.layout, "experts_read": round(self.experts_read, 3),
                "parts": self.parts.as_dict() if self.parts else None}


def floor_parts(model: ModelShape, run: RunShape, hw: Hardware, cost: StepCost, *,
                latency: CollectiveLatency | None = None, cuda_graphs: bool | None = True) -> FloorParts:
    """The step's floor by part: its bytes (weights, KV) at peak bandwidth, its FLOPs at peak tensor rate,
    each collective at the latency of its message (on a GPU host: doctor's measured table, else the cited
    figure for the TP group's size), and the kernel launches when CUDA graphs are off (None: not known,
    taken as on, the default)."""
    bw = hw.memory_gb_s * 1e9
    compute = None
    if hw.tflops:
        compute = sum(flops / ((hw.tflops.get(rate) or hw.tflops.get("bf16")) * 1e12)
                      for rate, flops in cost.flops_by_rate.items()) * 1000
    coll_s, count, source = 0.0, 0, None
    if hw.figure == "gpu" and cost.collective_kinds:
        table = collective_latency.for_group(run.tp, latency, link_gb_s=hw.link_gb_s)
        source = table.source
        for kind in cost.collective_kinds:
            coll_s += kind.count * table.seconds(kind.message_bytes)
            count += kind.count
    launches = model.layers * KERNELS_PER_LAYER if cuda_graphs is False and hw.figure == "gpu" else 0
    weights_ms, kv_ms, sampler_ms = (cost.weight_bytes / bw * 1000, cost.kv_bytes / bw * 1000,
                                     cost.sampler_bytes / bw * 1000)
    return FloorParts(weights_ms=weights_ms, kv_ms=kv_ms, sampler_ms=sampler_ms, compute_ms=compute,
                      collectives_ms=coll_s * 1000, collectives=count,
                      collective_each_us=coll_s / count * 1e6 if count else 0.0, latency_source=source,
                      launches_ms=launches * LAUNCH_S * 1000, launches=launches,
                      families=_by_family(model, cost, weights_ms=weights_ms, kv_ms=kv_ms, sampler_ms=sampler_ms,
                                          compute_ms=compute, collectives_ms=coll_s * 1000,
                                          launches_ms=launches * LAUNCH_S * 1000))


def _by_family(model: ModelShape, cost: StepCost, *, weights_ms: float, kv_ms: float, sampler_ms: float,
               compute_ms: float | None, collectives_ms: float, launches_ms: float) -> dict[str, float]:
    """The floor's parts by the kernel family that does the work: each weight class's bytes to its family
    (WeightGroup.family; the draft head's read spread over them alike), the KV and indexer caches to
    attention, the sampler's read to sampling, the collectives to collectives and the launches to the idle
    gaps between kernels. Where compute binds, the bandwidth parts are scaled up to it in proportion (an
    approximation: FLOPs are not counted per family)."""
    bandwidth = weights_ms + kv_ms + sampler_ms
    roof = max(bandwidth, compute_ms or 0.0) / bandwidth if bandwidth else 1.0
    classes = sum(cost.bytes_by_class.values())
    out: dict[str, float] = {}

    def add(family: str, ms: float) -> None:
        if ms > 0:
            out[family] = out.get(family, 0.0) + ms

    for g in model.groups:
        add(g.family, cost.bytes_by_class.get(g.name, 0.0) / classes * weights_ms * roof if classes else 0.0)
    add(kf.ATTENTION, kv_ms * roof)
    add(kf.SAMPLING, sampler_ms * roof)
    add(kf.COLLECTIVES, collectives_ms)
    add(kf.IDLE, launches_ms)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def score(model: ModelShape, run: RunShape, hw: Hardware, measured_tpot_ms: float, *,
          latency: CollectiveLatency | None = None, cuda_graphs: bool | None = True) -> Score:
    """A measured mean TPOT against the step's floor."""
    speculative = run.draft_tokens > 0
    known = run.accept_length if speculative and run.accept_length and run.accept_length > 0 else None
    # Acceptance unknown: the floor of a plain step, one token per request (effective MBU).
    costed = run if (known or not speculative) else replace(run, draft_tokens=0, accept_length=None)
    cost = step_cost(model, costed, shared_memory=hw.shared_memory)
    per_step_tokens = known or 1.0
    parts = floor_parts(model, costed, hw, cost, latency=latency, cuda_graphs=cuda_graphs)
    floor_ms = parts.step_ms / per_step_tokens
    bandwidth_ms = parts.bandwidth_ms / per_step_tokens
    compute_ms = parts.compute_ms / per_step_tokens if parts.compute_ms is not None else None
    link_ms = cost.link_bytes_per_gpu / (hw.link_gb_s * 1e9) * 1000 if hw.link_gb_s and cost.link_bytes_per_gpu else None
    ratio = measured_tpot_ms / floor_ms if floor_ms > 0 else math.inf
    return Score(figure=hw.figure, hardware=hw.name, floor_tpot_ms=floor_ms, bandwidth_tpot_ms=bandwidth_ms,
                 compute_tpot_ms=compute_ms, link_ms=link_ms, measured_tpot_ms=measured_tpot_ms, ratio=ratio,
                 mbu=bandwidth_ms / measured_tpot_ms if measured_tpot_ms else 0.0,
                 mfu=(compute_ms / measured_tpot_ms) if compute_ms is not None and measured_tpot_ms else None,
                 basis="step" if (known or not speculative) else "per token (acceptance unknown)",
                 bytes_per_gpu=cost.bytes_per_gpu, flops_per_gpu=cost.flops_per_gpu, tokens_per_step=cost.tokens,
                 parts=parts, layout=run.layout.name(), experts_read=cost.experts_read)
