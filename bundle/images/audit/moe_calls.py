"""What the pinned SGLang's flashinfer_mxfp4 MoE runner asks FlashInfer's fused MoE for, read from its
source (sglang/srt/layers/moe/moe_runner/flashinfer_cutlass.py, as the image holds it): each call of
`cutlass_fused_moe` reached from the functions registered for "flashinfer_mxfp4", with the keywords
it passes and the (activation, weight) dtype pair FlashInfer's binding picks for it.

FlashInfer's binding (fused_moe/cutlass_backend/flashinfer_cutlass_fused_moe_binding.cu) runs MXFP4
weights with e4m3 activations and `use_mxfp8_act_scaling` on its fp8 x fp4 runner
(isWMxfp4AMxfp8Quant, moe_gemm_kernels_fp8_fp4.cu), and with 16-bit activations on the bf16 x fp4
one (isWFP4A16Quant, moe_gemm_kernels_bf16_fp4.cu). So a call whose `input` is the output of
`mxfp8_quantize` and which passes `use_mxfp8_act_scaling` asks for fp8_fp4; any other call of this
MXFP4 runner asks for bf16_fp4.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

REGISTERED_FOR = "flashinfer_mxfp4"
CALLEES = ("cutlass_fused_moe", "flashinfer_cutlass_fused_moe")


@dataclass(frozen=True)
class MoeCall:
    function: str
    line: int
    keywords: tuple[str, ...]
    pair: str  # FlashInfer's file suffix: fp8_fp4, bf16_fp4

    def pair_text(self) -> str:
        act, weight = self.pair.split("_")
        return f"{act} x {weight}"


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _registered(fn: ast.FunctionDef) -> bool:
    for deco in fn.decorator_list:
        if isinstance(deco, ast.Call) and _name(deco.func) == "register_fused_func":
            if any(isinstance(a, ast.Constant) and a.value == REGISTERED_FOR for a in deco.args):
                return True
    return False


def _assigned_from(fn: ast.FunctionDef, var: str) -> list[ast.AST]:
    """The values assigned to `var` in `fn` (tuple unpacking included)."""
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names = [target] if isinstance(target, ast.Name) else getattr(target, "elts", [])
                if any(isinstance(n, ast.Name) and n.id == var for n in names):
                    out.append(node.value)
    return out


def _pair(fn: ast.FunctionDef, call: ast.Call) -> str:
    kwargs = {k.arg: k.value for k in call.keywords if k.arg}
    source = kwargs.get("input")
    mxfp8 = isinstance(source, ast.Name) and any(
        isinstance(v, ast.Call) and _name(v.func) == "mxfp8_quantize" for v in _assigned_from(fn, source.id))
    return "fp8_fp4" if mxfp8 and "use_mxfp8_act_scaling" in kwargs else "bf16_fp4"


def calls(source: str) -> list[MoeCall]:
    """Every cutlass_fused_moe call the flashinfer_mxfp4 runner reaches (its registered functions and the
    module's functions they call, two levels down)."""
    tree = ast.parse(source)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    reached = [f for f in functions.values() if _registered(f)]
    seen = {f.name for f in reached}
    for _ in range(2):
        for fn in list(reached):
            for node in ast.walk(fn):
                callee = _name(node.func) if isinstance(node, ast.Call) else None
                if callee in functions and callee not in seen:
                    seen.add(callee)
                    reached.append(functions[callee])
    out = []
    for fn in reached:
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and _name(node.func) in CALLEES:
                out.append(MoeCall(fn.name, node.lineno, tuple(sorted(k.arg for k in node.keywords if k.arg)),
                                   _pair(fn, node)))
    return sorted(out, key=lambda c: c.line)
