"""The census of what one rank of the pinned SGLang's DeepSeek-V4 model holds, counted from the model itself.

A standalone script (standard library, torch and SGLang only): it runs inside a container of the no-GPU
modes' image, where SGLang's whole closure is installed, with no bundle package and no GPU. For each
rank layout asked for it builds SGLang's own `DeepseekV4ForCausalLM` (through SGLang's own ServerArgs,
ModelConfig, quantization config and model class, as a scheduler process does) on the meta device, in
the dtypes SGLang keeps on sm_120, and counts every parameter and buffer of one rank by weight class.

    python census_probe.py --config-dir DIR --out FILE --layout 4:1 --layout 4:4 ... [--draft mtp]

`--draft mtp`: each layout's census is of the MTP draft instead (DeepSeek's NEXTN head, what
`levers.speculative: mtp` / `mtp-light` run through SGLang's EAGLE path): the server arguments carry the
lever's `--speculative-algorithm EAGLE` flags and the model is SGLang's own draft build
(`ModelConfig.from_server_args(..., is_draft_model=True)`: SGLang renames the architecture to
`DeepseekV4ForCausalLMNextN`, one decoder layer built with compress ratio 0, e_proj/h_proj, the hc head),
under the same patches as the target and no others. The draft builds its own embedding and output head,
which EAGLE's worker replaces with the target's at load (`set_embed_and_head`): they are counted, and
each such class is marked `"shared_with_target": true` (held once, by the target; still read by every
draft step for the head).

`--layout TP:EP` (EP 1: expert parallelism off; EP = TP: on). The JSON written to FILE holds, per layout,
each class's bytes, element count and dtypes on rank 0 (ranks are alike: TP splits evenly, and EP gives
every rank n_routed / EP experts), the routed experts' count on the rank, and the per-layer compression
ratios the model was built with.

What is patched for a GPU-less build, and nothing else (each a platform fact of the sm_120 host the
census describes, never a change to what the model builds):
- torch.cuda's queries answer as an RTX PRO 6000 (compute capability 12.0, 96 GB, 188 SMs, N devices):
  SGLang reads the platform at import time (`is_cuda()`, `is_sm120_supported()`, `get_device_sm()`) and
  picks its sm_120 layers, quantization methods and levers from it. NVML is kept out of the answer
  (`torch.cuda._get_nvml_device_index` raises) so the patched capability is the one read.
- SGLang's own platform facts (`runtime_context.override_platform`, the facts the image audit's resolver
  gives: bundle/images/audit/probe.py's SM120_PLATFORM) are installed as an sm_120 host's, for the readers
  that ask SGLang's platform context rather than torch.
- torch.cuda.Stream and Event are inert objects: the model creates its side streams at construction.
- A torch function mode sends every tensor made for a CUDA device to the meta device instead (the
  rotary caches and a few buffers name `device="cuda"` explicitly); nothing is allocated.
- The parallel state: SGLang's own `runtime_context.publish(server_args, role="scheduler",
  ranks=SpawnRanks(world_rank=0))` derives every rank from the published widths without process groups,
  as SGLang's launcher does before it builds them; no process group is created. The group handles the
  model asks for at construction (pp_group's first/last rank, a group's size and this rank's place in it)
  are stated with SGLang's own `get_parallel().override_permanently(...)` as inert stand-ins carrying the
  published width and rank 0; any other use of one raises, naming it.
Nothing is loaded: the census counts what the model is built to hold. Load-time transformations that
keep a tensor's size (FP8 block-scale layouts, MXFP4 shuffles) do not change the count; `wo_a` is built
BF16 by SGLang itself when the FP8 wo_a GEMM is off (the checkpoint's FP8 wo_a is dequantized into it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
import traceback

GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
CAPABILITY = (12, 0)
GPU_MEMORY = 96 * 1024**3
SMS = 188

# (class, pattern on the parameter's or buffer's full name), first match wins. "read" says how a decode
# step reads the class: whole every step, per routed expert touched, or only the rows it indexes.
CLASSES = [
    ("routed experts", r"\.mlp\.experts\.", "per touched expert"),
    ("shared experts", r"\.mlp\.shared_experts\.", "every step"),
    ("router", r"\.mlp\.gate\.", "every step"),
    ("hash routing table", r"\.mlp\.topk\.", "rows indexed"),
    ("indexer compressor", r"\.indexer\.compressor\.(?!.*freqs)", "every step"),
    ("indexer wq_b", r"\.indexer\.wq_b\.", "every step"),
    ("indexer weights_proj", r"\.indexer\.weights_proj\.", "every step"),
    ("attention compressor", r"\.self_attn\.compressor\.(?!.*freqs)", "every step"),
    ("attention wq_a + wkv", r"\.self_attn\.(wq_a|wkv|wqkv_a)\.", "every step"),
    ("attention wq_b", r"\.self_attn\.wq_b\.", "every step"),
    ("attention wo_a", r"\.self_attn\.wo_a\.", "every step"),
    ("attention wo_b", r"\.self_attn\.wo_b\.", "every step"),
    ("hyper-connection mixers", r"(^|\.)hc_", "every step"),
    ("rotary tables", r"(freqs_cis|cos_sin_cache|cos_cache|sin_cache|inv_freq)", "rows indexed"),
    ("norms and sinks", r"(norm\.weight|attn_sink|norm\.|attn_mqa\.[kv]_scale)", "every step"),
    ("embedding", r"embed_tokens\.", "rows indexed"),
    ("output head", r"^lm_head\.", "every step"),
]
# The MTP draft's own classes (DeepseekV4ModelNextN), ahead of the target's: its input projections of the
# token's embedding and of the target's hidden state.
DRAFT_CLASSES = [("draft e_proj + h_proj", r"^model\.(e_proj|h_proj)\.", "every step")]
# What EAGLE's draft worker replaces with the target's own tensors at load (set_embed_and_head).
SHARED_WITH_TARGET = ("embedding", "output head")
# The flags of levers.speculative's mtp-light (bundle/config/levers.py, restated: no bundle package here);
# the draft's build does not depend on the step count.
DRAFT_ARGS = {"mtp": ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "1",
                      "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2"]}


# The image audit's sm_120 platform facts (bundle/images/audit/probe.py, SM120_PLATFORM): this script runs
# without the bundle package, so they are restated here.
SM120_PLATFORM = dict(is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False, is_mps=False,
                      is_sm90=False, is_sm100=False, is_sm100_or_sm110=False, is_sm110=False, is_sm120=True,
                      is_blackwell=True, is_hopper_with_cuda_12_3=False, has_flashinfer=True,
                      device_sm=120, device_capability=(12, 0))


class _Inert:
    """Stands for a CUDA stream or event at construction time (nothing runs)."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


class _Properties:
    name = GPU_NAME
    major, minor = CAPABILITY
    total_memory = GPU_MEMORY
    multi_processor_count = SMS
    L2_cache_size = 128 * 1024**2
    warp_size = 32
    gcnArchName = ""


def patch_platform(devices: int) -> None:
    """torch.cuda answers as `devices` RTX PRO 6000s (see the module's docstring)."""
    import torch

    cuda = torch.cuda
    cuda.is_available = lambda: True
    cuda.is_initialized = lambda: True
    cuda.device_count = lambda: devices
    cuda.current_device = lambda: 0
    cuda.set_device = lambda *a, **k: None
    cuda.get_device_capability = lambda *a, **k: CAPABILITY
    cuda.get_device_name = lambda *a, **k: GPU_NAME
    cuda.get_device_properties = lambda *a, **k: _Properties()
    cuda.mem_get_info = lambda *a, **k: (GPU_MEMORY, GPU_MEMORY)
    cuda.Stream = _Inert
    cuda.Event = _Inert
    cuda.current_stream = lambda *a, **k: _Inert()
    cuda.is_current_stream_capturing = lambda: False

    def no_nvml(*args, **kwargs):
        raise RuntimeError("census: NVML is not asked (no GPU here)")

    cuda._get_nvml_device_index = no_nvml
    from sglang.srt.runtime_context import override_platform

    override_platform(**SM120_PLATFORM).install()  # for the process's life: the census builds nothing else


def cuda_to_meta():
    """A torch function mode: a tensor made for (or moved to) a CUDA device is made on meta instead."""
    import torch
    from torch.overrides import TorchFunctionMode

    def is_cuda(device) -> bool:
        if isinstance(device, torch.device):
            return device.type == "cuda"
        if isinstance(device, int):
            return True
        return isinstance(device, str) and device.startswith("cuda")

    class CudaToMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs and is_cuda(kwargs["device"]):
                kwargs["device"] = torch.device("meta")
            if func in (torch.Tensor.cuda,):
                return args[0].to("meta")
            if func is torch.Tensor.to:
                args = tuple(torch.device("meta") if is_cuda(a) else a for a in args)
            return func(*args, **kwargs)

    return CudaToMeta()


# A group handle -> (its width, its rank) as ParallelContext names them.
GROUPS = {"world_group": ("tp_size", "tp_rank"), "tp_group": ("tp_size", "tp_rank"), "pp_group": ("pp_size", "pp_rank"),
          "moe_ep_group": ("moe_ep_size", "moe_ep_rank"), "moe_dp_group": ("moe_dp_size", "moe_dp_rank"),
          "moe_tp_group": ("moe_tp_size", "moe_tp_rank"), "attn_tp_group": ("attn_tp_size", "attn_tp_rank"),
          "attn_cp_group": ("attn_cp_size", "attn_cp_rank"), "shared_experts_tp_group": ("tp_size", "tp_rank"),
          "dcp_group": ("dcp_size", "dcp_rank")}


class GroupStandIn:
    """A process group's handle as the model's constructors read it: its width and this rank's place."""

    def __init__(self, name: str, world_size: int, rank: int):
        self.unique_name, self.world_size, self.rank_in_group = name, world_size, rank
        self.rank, self.local_rank, self.ranks = rank, rank, list(range(world_size))
        self.is_first_rank, self.is_last_rank = rank == 0, rank == world_size - 1
        self.first_rank, self.last_rank = 0, world_size - 1
        self.device_group = self.cpu_group = None

    def __getattr__(self, name):
        raise AttributeError(f"census: the {self.unique_name} stand-in has no {name!r} (a process group was used "
                             "beyond its width and rank while the model was built)")


def stand_in_groups() -> None:
    from sglang.srt.runtime_context import get_parallel

    parallel = get_parallel()

    def read(name: str, default: int) -> int:
        try:
            value = getattr(parallel, name)
        except (AttributeError, RuntimeError, ValueError):
            return default
        return int(value) if value is not None else default

    groups = {}
    for group, (width, rank) in GROUPS.items():
        try:
            getattr(parallel, group)
            continue  # written already
        except (AttributeError, RuntimeError, ValueError):
            pass
        groups[group] = GroupStandIn(group, read(width, 1), read(rank, 0))
    parallel.override_permanently(**groups)


def classify(name: str, draft: bool = False) -> tuple[str, str]:
    for cls, pattern, read in (DRAFT_CLASSES if draft else []) + CLASSES:
        if re.search(pattern, name):
            return cls, read
    return "other", "every step"


def server_args_for(config_dir: str, tp: int, ep: int, dp_attention: bool, draft: str | None = None):
    """SGLang's own ServerArgs for the layout, through SGLang's own command-line entry (as the image audit
    resolves a server's arguments); `--device cuda`: what get_device() answers on a GPU host."""
    from sglang.srt.server_args import prepare_server_args

    argv = ["--model-path", config_dir, "--tp-size", str(tp), "--ep-size", str(ep), "--load-format", "dummy",
            "--device", "cuda"]
    if dp_attention:
        argv += ["--enable-dp-attention", "--dp-size", str(tp)]
    if draft:
        argv += DRAFT_ARGS[draft]
    return prepare_server_args(argv)


def scheduler_init() -> None:
    """What SGLang's scheduler sets from the published config before it builds the model
    (Scheduler.init_moe_gemm_config): the MoE runner (flashinfer_mxfp4 on sm_120 picks the MXFP4 expert
    method) and the GEMM back ends."""
    from sglang.srt.layers.moe.utils import initialize_moe_config
    from sglang.srt.layers.quantization.fp4_utils import initialize_fp4_gemm_config
    from sglang.srt.layers.quantization.fp8_utils import initialize_fp8_gemm_config
    from sglang.srt.layers.quantization.unquant import initialize_bf16_gemm_config

    initialize_moe_config()
    initialize_fp8_gemm_config()
    initialize_fp4_gemm_config()
    initialize_bf16_gemm_config()


def fill_config_defaults(hf_config) -> dict:
    """The keys a config.json leaves out, from SGLang's own DeepSeekV4Config defaults (the audit's copy of
    DeepSeek-V4-Flash's config.json lacks the hyper-connection keys a checkpoint's carries); returns what
    was filled, for the record."""
    import dataclasses

    from sglang.srt.configs.deepseek_v4 import DeepSeekV4Config

    filled = {}
    for f in dataclasses.fields(DeepSeekV4Config):
        if f.default is dataclasses.MISSING or f.name.startswith("_"):
            continue
        try:
            getattr(hf_config, f.name)
        except AttributeError:
            setattr(hf_config, f.name, f.default)
            filled[f.name] = f.default
    return filled


def census_of(config_dir: str, tp: int, ep: int, dp_attention: bool = False, draft: str | None = None) -> dict:
    import torch
    from sglang.srt import runtime_context
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.model_loader import loader
    from sglang.srt.layers.moe.utils import get_moe_runner_backend
    from sglang.srt.model_loader.utils import set_default_torch_dtype

    server_args = server_args_for(config_dir, tp, ep, dp_attention, draft)
    runtime_context.get_parallel().clear_stamp()  # the previous layout's ranks and group stand-ins
    runtime_context.publish(server_args, role="scheduler", ranks=runtime_context.SpawnRanks(world_rank=0, gpu_id=0))
    stand_in_groups()
    scheduler_init()
    # the draft: as SGLang's EAGLE worker builds its draft runner's config
    model_config = ModelConfig.from_server_args(server_args, is_draft_model=bool(draft))
    filled = fill_config_defaults(model_config.hf_config)
    load_config = LoadConfig(load_format="dummy")
    quant_config = loader._get_quantization_config(model_config, load_config)
    with set_default_torch_dtype(model_config.dtype), torch.device("meta"), cuda_to_meta():
        model = loader._initialize_model(model_config, load_config, quant_config)
    classes: dict[str, dict] = {}
    local_experts, moe_layers = None, 0
    for module_name, module in model.named_modules():
        if hasattr(module, "num_local_experts") and module_name.endswith("mlp.experts"):
            local_experts = int(module.num_local_experts)
            moe_layers += 1
    tensors = [(n, t, "parameter") for n, t in model.named_parameters(remove_duplicate=True)]
    tensors += [(n, t, "buffer") for n, t in model.named_buffers(remove_duplicate=True)]
    for name, tensor, kind in tensors:
        cls, read = classify(name, bool(draft))
        entry = classes.setdefault(cls, {"bytes": 0, "elements": 0, "tensors": 0, "dtypes": {}, "read": read,
                                         "examples": []})
        if draft and cls in SHARED_WITH_TARGET:
            entry["shared_with_target"] = True
        size = tensor.numel() * tensor.element_size()
        entry["bytes"] += size
        entry["elements"] += tensor.numel()
        entry["tensors"] += 1
        dtype = str(tensor.dtype).replace("torch.", "")
        entry["dtypes"][dtype] = entry["dtypes"].get(dtype, 0) + size
        if len(entry["examples"]) < 4 and not re.search(r"layers\.([1-9]\d*)\.", name):
            entry["examples"].append(f"{name} {kind} {dtype} {list(tensor.shape)}")
    config = model_config.hf_config
    return {"tp": tp, "ep": ep, "dp_attention": dp_attention, "rank": 0,
            **({"draft": draft, "architecture": type(model).__name__} if draft else {}),
            "quantization": quant_config.get_name() if quant_config else None,
            "moe_runner_backend": str(get_moe_runner_backend()),
            "expert_method": next((type(m.quant_method).__name__ for n, m in model.named_modules()
                                   if n.endswith("mlp.experts") and hasattr(m, "quant_method")), None),
            "local_experts": local_experts, "moe_layers": moe_layers,
            "compress_ratios": list(getattr(config, "compress_ratios", []) or []),
            "hash_layers": int(getattr(config, "n_hash_layers", 0) or 0),
            "config_defaults_filled": filled,
            "classes": dict(sorted(classes.items()))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config-dir", required=True, help="a folder with the model's config.json")
    parser.add_argument("--out", required=True)
    parser.add_argument("--layout", action="append", default=[], help="TP:EP[:dpa]")
    parser.add_argument("--draft", choices=sorted(DRAFT_ARGS), help="count the speculative draft instead")
    args = parser.parse_args(argv)
    layouts = [tuple(x.split(":")) for x in args.layout] or [("4", "1")]
    devices = max(int(x[0]) for x in layouts)
    patch_platform(devices)
    import sglang
    import torch

    out = {"sglang": getattr(sglang, "__version__", "?"), "torch": torch.__version__, "gpu": GPU_NAME,
           "capability": ".".join(map(str, CAPABILITY)),
           "env": {k: v for k, v in os.environ.items() if k.startswith("SGLANG_")}, "layouts": [],
           **({"draft": args.draft} if args.draft else {})}
    config_text = open(os.path.join(args.config_dir, "config.json"), "rb").read()
    import hashlib

    out["config_sha256"] = hashlib.sha256(config_text).hexdigest()
    for layout in layouts:
        tp, ep = int(layout[0]), int(layout[1])
        dpa = len(layout) > 2 and layout[2] == "dpa"
        t0 = time.monotonic()
        print(f"census: TP {tp}, EP {ep}{', DP attention' if dpa else ''} ...", file=sys.stderr, flush=True)
        try:
            entry = census_of(args.config_dir, tp, ep, dpa, args.draft)
        except Exception as exc:  # one layout that cannot be built is recorded, the others still run
            entry = {"tp": tp, "ep": ep, "dp_attention": dpa, "error": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc()[-3000:]}
        entry["seconds"] = round(time.monotonic() - t0, 1)
        out["layouts"].append(entry)
        print(f"census: TP {tp}, EP {ep}: " + (entry.get("error") or "ok") + f" ({entry['seconds']} s)",
              file=sys.stderr, flush=True)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
    return 0 if all("error" not in e for e in out["layouts"]) else 1


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
