"""The JIT modules the kernels layer compiles for sm_120a at build time, and why each is needed.

SGLang 0.5.23 builds these with FlashInfer's own generators at first use on sm_120
(`gen_*_module().build_and_load()`); the kernels layer runs the same generators at build time
(docker/kernels-build.py) and puts each library where FlashInfer's loader looks before its JIT
cache: flashinfer/data/aot/<name>/<name>.so (is_aot). A fresh JIT cache volume then still finds them.

NEEDS maps a choice the audit predicts (a field of SGLang's resolved ServerArgs) to the modules
that choice loads; `bundle build` compiles every module of the table (any config's choices then
find theirs), and so does a local build (`--standin`: CI builds and audits the GPU image's real
kernels layer); `--kernels` picks others, and `bundle audit` checks the modules the predicted
choices need against what the layer holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from bundle.errors import InputError


@dataclass(frozen=True)
class Generator:
    module: str  # the FlashInfer module holding the generator
    function: str  # its gen_*_module, called with no arguments

    def target(self) -> str:
        return f"{self.module}:{self.function}"


# FlashInfer 0.7.2's generators by the module name they build (the name is the aot/ folder).
GENERATORS: dict[str, Generator] = {
    "sparse_mla_sm120": Generator("flashinfer.jit.mla", "gen_sparse_mla_sm120_module"),
    # FlashInfer's sm_120 fused MoE cut to the MXFP8 x MXFP4 pair DeepSeek-V4 calls (docker/kernels_narrow.py,
    # installed in the layer; the audit checks it against SGLang's calls): FlashInfer's own full module,
    # gen_cutlass_fused_moe_sm120_module, is 4,479 CPU-s of nvcc, most of an hour on 2 cores
    # (docs/images.md, "The fused MoE, cut to what DeepSeek-V4 calls"; benchmarks/kernels_layer.py).
    "fused_moe_120": Generator("kernels_narrow", "gen_fused_moe_120_module"),
    "mxfp8_quantization_sm100": Generator("flashinfer.jit.fp8_quantization", "gen_mxfp8_quantization_sm100_module"),
    "sampling": Generator("flashinfer.jit.sampling", "gen_sampling_module"),
    "mhc": Generator("flashinfer.jit.mhc", "gen_mhc_module"),
    # Needed by no choice: the smallest module (about a minute of nvcc), `--kernels norm` (the lent-GPU proof).
    "norm": Generator("flashinfer.jit.norm", "gen_norm_module"),
}

# (resolved field, value) -> the modules that choice builds at first use on sm_120.
NEEDS: dict[tuple[str, str], tuple[str, ...]] = {
    # deepseek_v4.py -> flash_mla_sm120.py -> gen_sparse_mla_sm120_module().build_and_load()
    ("sm120_sparse_mla_backend", "flashinfer"): ("sparse_mla_sm120",),
    # mxfp4.py (cutlass_sm120) -> get_cutlass_fused_moe_module("120"), its MXFP8 activations quantized
    # by mxfp8_quantize (the MXFP8 x MXFP4 sm_120 kernels)
    ("moe_runner_backend", "flashinfer_mxfp4"): ("fused_moe_120", "mxfp8_quantization_sm100"),
}
# Loaded by every server on sm_120 whatever the levers say: FlashInfer's top-k/top-p sampling.
ALWAYS: tuple[str, ...] = ("sampling",)
# Built by default though no table row asks for it: mHC (DeepSeek-V4's hyper-connections) when
# SGLang's mhc path is on; cheap (about 30 CPU-s).
OPTIONAL: tuple[str, ...] = ("mhc",)


def default_modules() -> list[str]:
    """What `bundle build` compiles: every module a choice of the table, or every server, needs."""
    names = [*ALWAYS, *(m for mods in NEEDS.values() for m in mods), *OPTIONAL]
    return list(dict.fromkeys(names))


def needed_by(resolved: dict) -> list[str]:
    """The modules one server's resolved choices load (ALWAYS included)."""
    names = list(ALWAYS)
    for (field, value), modules in NEEDS.items():
        if str(resolved.get(field)) == value:
            names += modules
    return list(dict.fromkeys(names))


def check_names(names: list[str]) -> list[str]:
    """`names` in GENERATORS' order; a BundleError naming every unknown one."""
    unknown = [n for n in names if n not in GENERATORS]
    if unknown:
        raise InputError(f"unknown kernel module(s): {', '.join(unknown)}",
                         hint=f"bundle build --kernels NAME [NAME ...] with names from: {', '.join(GENERATORS)}")
    return [n for n in GENERATORS if n in names]


def build_arg(names: list[str]) -> str:
    """The KERNELS build argument: `name=module:function` words, what docker/kernels-build.py reads."""
    return " ".join(f"{n}={GENERATORS[n].target()}" for n in check_names(names))
