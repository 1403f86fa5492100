"""Compile the decode kernels for a GPU that is not here (sm_120 from a CPU-only host).

`python -m sglang_sm120_kernels.aot --arch 120` runs Triton's full pipeline (TTIR -> TTGIR ->
LLVM -> PTX -> cubin with the ptxas Triton ships) for `GPUTarget("cuda", 120, 32)`, with the same
constexprs and 16-byte-divisibility hints the JIT would use in a server, then reports what ptxas
says (registers, spills, stack) and counts tensor-core instructions in the SASS of the cubin.
No GPU or driver is needed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from . import sparse_mla_decode as smd

# Types of the partial kernel's arguments, in order; "D" marks those the JIT sees as multiples of
# 16 (pointers from torch's allocator, q strides, page bytes).
_PARTIAL_ARGS = [
    ("q_ptr", "*bf16", "D"), ("stride_qb", "i32", "D"), ("stride_qh", "i32", "D"), ("H", "i32", ""),
    ("kv_ptr", "*u8", "D"), ("idx_ptr", "*i32", "D"), ("stride_ib", "i32", "D"), ("len_ptr", "*i32", "D"),
    ("topk", "i32", "D"), ("page_size", "i32", "D"), ("page_bytes", "i32", "D"), ("n_split", "i32", ""),
    ("xkv_ptr", "*u8", "D"), ("xidx_ptr", "*i32", "D"), ("stride_xib", "i32", "D"), ("xlen_ptr", "*i32", "D"),
    ("xtopk", "i32", "D"), ("xpage_size", "i32", "D"), ("xpage_bytes", "i32", "D"),
    ("o_part_ptr", "*fp32", "D"), ("lse_part_ptr", "*fp32", "D"), ("n_split_total", "i32", ""),
    ("tiles_per_split", "i32", ""), ("qk_scale_log2", "fp32", ""),
    ("counter_ptr", "*i32", "D"), ("sink_ptr", "*fp32", "D"), ("out_ptr", "*bf16", "D"),
    ("stride_ob", "i32", "D"), ("stride_oh", "i32", "D"), ("lse_out_ptr", "*fp32", "D"),
]  # fmt: skip
_COMBINE_ARGS = [
    ("o_part_ptr", "*fp32", "D"), ("lse_part_ptr", "*fp32", "D"), ("sink_ptr", "*fp32", "D"),
    ("out_ptr", "*bf16", "D"), ("stride_ob", "i32", "D"), ("stride_oh", "i32", "D"),
    ("lse_out_ptr", "*fp32", "D"), ("H", "i32", ""), ("n_split_total", "i32", ""),
]  # fmt: skip


def _with_partials(args: list, config: smd.DecodeConfig, last: bool) -> list:
    """`args` with o_part_ptr of the type the call stores the split partials in."""
    bf16 = smd._partials_in_bf16(config, last)
    return [(n, "*bf16" if bf16 else t, d) if n == "o_part_ptr" else (n, t, d) for n, t, d in args]


@dataclass
class CompileReport:
    kernel: str
    variant: str
    arch: str
    registers: int
    spill_stores_bytes: int
    spill_loads_bytes: int
    stack_bytes: int
    triton_shared_bytes: int
    num_warps: int
    tensor_core_sass: int  # HMMA/HGMMA instructions in the cubin's SASS
    sass_mnemonics: str


def _tool(name: str) -> str:
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    return str(bundled) if bundled.exists() else (shutil.which(name) or name)


def _compile_one(fn, arg_types, constexprs, target, num_warps, num_stages):
    backend = triton.compiler.make_backend(target)
    signature = {name: ty for name, ty, _ in arg_types}
    signature.update({name: "constexpr" for name in constexprs})
    attrs = {(i,): backend.parse_attr("D") for i, (_, _, a) in enumerate(arg_types) if a == "D"}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=target, options={"num_warps": num_warps, "num_stages": num_stages})


def _ptxas(capability: int) -> str:
    # The ptxas Triton itself uses for this target (a newer one, ptxas-blackwell, for sm_100+).
    from triton.backends.nvidia.compiler import get_ptxas

    return get_ptxas(capability).path


def _ptxas_report(ptx: str, arch: str, capability: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "k.ptx"
        p.write_text(ptx)
        res = subprocess.run(
            [_ptxas(capability), f"-arch={arch}", "-v", str(p), "-o", str(Path(tmp) / "k.cubin")],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    text = res.stdout + res.stderr

    def grab(pattern: str) -> int:
        m = re.search(pattern, text)
        return int(m.group(1)) if m else 0

    return {
        "registers": grab(r"Used (\d+) registers"),
        "spill_stores_bytes": grab(r"(\d+) bytes spill stores"),
        "spill_loads_bytes": grab(r"(\d+) bytes spill loads"),
        "stack_bytes": grab(r"(\d+) bytes stack frame"),
    }


def _sass_mnemonics(cubin: bytes) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "k.cubin"
        p.write_bytes(cubin)
        res = subprocess.run(
            [_tool("cuobjdump"), "--dump-sass", str(p)], capture_output=True, text=True, check=True
        )
    counts: dict = {}
    for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(?:\.[\w.]+)?", res.stdout):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


def variants(config: smd.DecodeConfig = smd.DEFAULT_CONFIG):
    """The specialisations a DeepSeek-V4-Flash server compiles: head blocks of 16 and of
    `max_block_h` (64 heads run as blocks of it), with and without the extra cache, topk_length
    and sink present (as SGLang always passes them); each as the attention kernel that a merge
    kernel follows (with the programmatic-dependent-launch trigger of merge="pdl" compiled in)
    and as the one with the "last" merge inside (suffix `+last`); each with the query loaded
    before the tile loop and in it (suffix `+qloop`: programs that walk one tile)."""
    for block_h, has_extra, last, q_in_loop in itertools.product(
        sorted({16, min(64, config.max_block_h)}), (False, True), (False, True), (False, True)
    ):
        yield (
            f"H{block_h}{'+extra' if has_extra else ''}{'+last' if last else ''}{'+qloop' if q_in_loop else ''}",
            smd._sparse_mla_partial_kernel,
            _with_partials(_PARTIAL_ARGS, config, last),
            {"HAS_LEN": True, "HAS_EXTRA": has_extra, "HAS_XLEN": has_extra, "BLOCK_H": block_h,
                 "BLOCK_T": config.block_t, "EMULATE_DOT": False, "Q_IN_LOOP": q_in_loop,
                 "LOOP_TO_LEN": config.loop_to_len, "MERGE_LAST": last, "LAUNCH_DEPENDENTS": not last,
                 "HAS_SINK": last},
            config.num_warps_h64 if block_h >= 32 else config.num_warps_h16,
            config.num_stages,
        )  # fmt: skip
    # The merge kernel: all of up to 16, 32 or 64 splits in one step (each with the column width
    # `_combine_block_d` gives it), or more than 64 walked in steps of 64.
    for s_block, one_step in ((16, True), (32, True), (64, True), (64, False)):
        yield (
            f"S{s_block}{'' if one_step else '+steps'}",
            smd._sparse_mla_combine_kernel,
            _with_partials(_COMBINE_ARGS, config, False),
            {"HAS_SINK": True, "S_BLOCK": s_block, "ONE_STEP": one_step,
                 "BLOCK_D": smd._combine_block_d(config, s_block), "WAIT_FOR_PRIMARY": True},
            config.combine_num_warps,
            1,
        )  # fmt: skip


def compile_all(arch: int = 120, config: smd.DecodeConfig = smd.DEFAULT_CONFIG) -> list[CompileReport]:
    """Compile every variant for `cuda:<arch>`; raises if Triton or ptxas rejects one."""
    target = GPUTarget("cuda", arch, 32)
    reports = []
    for variant, fn, args, constexprs, num_warps, num_stages in variants(config):
        k = _compile_one(fn, args, constexprs, target, num_warps, num_stages)
        # The cubin is ptxas's work for exactly this target; it fails to build if ptxas rejects it.
        assert k.asm["cubin"], "no cubin produced"
        target_line = re.search(r"^\.target\s+(\S+)", k.asm["ptx"], re.MULTILINE).group(1)
        ptxas = _ptxas_report(k.asm["ptx"], target_line, arch)
        sass = _sass_mnemonics(k.asm["cubin"])
        tc = sum(v for name, v in sass.items() if "MMA" in name)
        top = ", ".join(f"{n}:{c}" for n, c in sorted(sass.items(), key=lambda kv: -kv[1])[:8])
        reports.append(
            CompileReport(
                kernel=fn.__name__, variant=variant, arch=target_line, triton_shared_bytes=k.metadata.shared,
                num_warps=num_warps, tensor_core_sass=tc, sass_mnemonics=top, **ptxas,
            )
        )  # fmt: skip
    return reports


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--arch", type=int, default=120, help="compute capability x10 (120 = RTX PRO 6000 Blackwell)"
    )
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args(argv)
    reports = compile_all(ns.arch)
    if ns.json:
        print(json.dumps([asdict(r) for r in reports], indent=1))
    else:
        print(f"triton {triton.__version__}, ptxas {_ptxas(ns.arch)}")
        for r in reports:
            print(
                f"{r.kernel:28s} {r.variant:10s} {r.arch:8s} regs={r.registers:3d} spill_st={r.spill_stores_bytes} "
                f"spill_ld={r.spill_loads_bytes} stack={r.stack_bytes} smem={r.triton_shared_bytes} "
                f"warps={r.num_warps} tensor-core SASS={r.tensor_core_sass}  [{r.sass_mnemonics}]"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
