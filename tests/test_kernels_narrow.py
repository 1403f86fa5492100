"""docker/kernels_narrow.py's choices, on files shaped like FlashInfer's (the module runs in the kernels
layer; its build and load are checked there and by the audit, tests/test_audit_kernels.py): which
sources the cut keeps, and the generated definitions of the left-out symbols, compiled and linked
here: a module referencing a left-out symbol resolves at RTLD_NOW and its call throws naming it."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
from pathlib import Path

from tests.conftest import require_tool

REPO = Path(__file__).resolve().parents[1]


def _narrow():
    spec = importlib.util.spec_from_file_location("kernels_narrow", REPO / "docker" / "kernels_narrow.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cut_keeps_the_fp8_fp4_pair_and_its_sm120_tiles_and_everything_else_flashinfer_lists(tmp_path):
    narrow = _narrow()
    tiles = {
        "cutlass_kernel_file_gemm_grouped_sm120_M128_BS_group7.generated.cu":
            "INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM(Sm120, __nv_fp8_e4m3, SafeFP4, half,",
        "cutlass_kernel_file_gemm_grouped_sm120_M128_BS_group0.generated.cu":
            "INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM(Sm120, SafeFP4, SafeFP4, half,",
        "cutlass_kernel_file_gemm_sm90_M128_group1.generated.cu":
            "INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM(Sm90, __nv_fp8_e4m3, __nv_fp8_e4m3, half,",
    }
    for name, text in tiles.items():
        (tmp_path / name).write_text(text)
    kept = {p.name for p in tmp_path.iterdir() if narrow._kept(p)}
    assert kept == {"cutlass_kernel_file_gemm_grouped_sm120_M128_BS_group7.generated.cu"}
    for name, keep in (("moe_gemm_kernels_fp8_fp4.cu", True), ("moe_gemm_kernels_bf16_fp4.cu", False),
                       ("moe_gemm_kernels_fp16_uint4.cu", False), ("flashinfer_cutlass_fused_moe_binding.cu", True),
                       ("cutlass_fused_moe_instantiation.cu", True), ("moe_gemm_mixed_utils.cu", True)):
        assert narrow._kept(Path(name)) is keep, name
    assert narrow.left_out_pairs(["a/moe_gemm_kernels_fp8_fp4.cu", "a/moe_gemm_kernels_bf16_bf16.cu",
                                  "a/moe_gemm_kernels_fp32_fp32.cu", "a/lora.cpp"]) == ["bf16_bf16", "fp32_fp32"]


def test_a_left_out_symbol_resolves_at_load_and_throws_naming_its_pair(tmp_path):
    for tool in ("c++", "nm", "c++filt"):
        require_tool(tool, "apt-get install g++ binutils")
    narrow = _narrow()
    # A caller of a template member whose instantiation lives in a translation unit the cut leaves out.
    (tmp_path / "caller.cpp").write_text(
        "#include <exception>\n#include <string.h>\n"
        "namespace tensorrt_llm { template <class T, class W> struct MoeGemmRunner { void moeGemm(int); }; }\n"
        "extern \"C\" int call() { try { tensorrt_llm::MoeGemmRunner<float, double>().moeGemm(1); }\n"
        "  catch (const std::exception &e) { return strstr(e.what(), \"float x double is left out\") ? 7 : 1; }\n"
        "  return 0; }\n")
    caller = tmp_path / "caller.so"
    subprocess.run(["c++", "-shared", "-fPIC", "-o", caller, tmp_path / "caller.cpp"], check=True)
    missing = narrow.undefined_cxx(caller)
    assert len(missing) == 1 and "MoeGemmRunner" in missing[0]
    try:
        ctypes.CDLL(str(caller), mode=os.RTLD_NOW)
        raise AssertionError("RTLD_NOW resolved an undefined symbol")
    except OSError as exc:
        assert "undefined symbol" in str(exc)
    source = narrow.stub_source(missing)
    assert "float x double is left out" in source
    (tmp_path / "left_out.cpp").write_text(source)
    linked = tmp_path / "linked.so"
    subprocess.run(["c++", "-shared", "-fPIC", "-o", linked, tmp_path / "caller.cpp", tmp_path / "left_out.cpp"],
                   check=True)
    assert narrow.undefined_cxx(linked) == []
    assert ctypes.CDLL(str(linked), mode=os.RTLD_NOW).call() == 7


# The shape of FlashInfer 0.7.2's cutlass_fused_moe_instantiation.cu (abridged: its includes, a guarded
# list, a statement over two lines, an SM90 scale mode, a commented-out one and the finalize macros).
_INSTANTIATION = """#include "cutlass_fused_moe_kernels.cuh"
#include "moe_kernels.h"
#include <cuda.h>

namespace tensorrt_llm::kernels::cutlass_kernels {
template class CutlassMoeFCRunner<float, float>;
#ifdef ENABLE_FP8
// template class CutlassMoeFCRunner<__nv_fp8_e4m3, __nv_fp8_e4m3>;
template class CutlassMoeFCRunner<__nv_fp8_e4m3, __nv_fp8_e4m3, half>;
#endif
#ifdef ENABLE_FP4
template class CutlassMoeFCRunner<__nv_fp8_e4m3, Fp4Type, half>;
template class CutlassMoeFCRunner<__nv_fp8_e4m3, Fp4Type, half, half, half, false,
                                  Sm90Wfp4Afp8ScaleMode::kHummingPreMmaE8M0>;
#ifdef ENABLE_BF16
template class CutlassMoeFCRunner<__nv_fp8_e4m3, Fp4Type, __nv_bfloat16>;
template class CutlassMoeFCRunner<__nv_bfloat16, Fp4Type>;
#endif
#endif
INSTANTIATE_FINALIZE_MOE_ROUTING(half, half, half);
}
"""


def test_the_runner_instantiations_keep_flashinfers_statements_for_mxfp8_x_mxfp4_on_sm120_only(tmp_path):
    narrow = _narrow()
    for name in ("cutlass_fused_moe_kernels.cuh", "moe_kernels.h"):
        (tmp_path / name).write_text("")
    text = narrow.narrow_instantiation(_INSTANTIATION, tmp_path)
    runners = [" ".join(m.group("args").split()) for m in narrow._RUNNER.finditer(text)]
    assert runners == ["__nv_fp8_e4m3, Fp4Type, half", "__nv_fp8_e4m3, Fp4Type, __nv_bfloat16"]
    # What is left out is named where it stood; the guards, the finalize routing and a system include stay.
    assert "left out (docker/kernels_narrow.py): CutlassMoeFCRunner<__nv_bfloat16, Fp4Type>" in text
    assert "kHummingPreMmaE8M0> */" in text
    assert "#ifdef ENABLE_BF16" in text and "INSTANTIATE_FINALIZE_MOE_ROUTING(half, half, half);" in text
    assert f'#include "{tmp_path}/moe_kernels.h"' in text and "#include <cuda.h>" in text


def test_an_instantiation_list_without_the_kept_runner_stops_the_build_naming_the_file(tmp_path):
    narrow = _narrow()
    try:
        narrow.narrow_instantiation("template class CutlassMoeFCRunner<half, half>;\n", tmp_path)
        raise AssertionError("a list without the kept pair was accepted")
    except SystemExit as exc:
        assert "instantiates no runner" in str(exc) and "RUNNERS_KEPT" in str(exc)
