"""The audit's toolchain and kernels checks on the facts the probe reports (in-process, no image):
each planted fault is a FAIL naming the module or the compiler, with a fix; the real image's facts
are checked by tests/test_audit.py's planted audit (Docker tier)."""

from __future__ import annotations

import copy
import importlib.util
import subprocess
from pathlib import Path

import pytest

from bundle.findings import Level
from bundle.images import kernels_jit
from bundle.images.audit import checks_kernels
from bundle.images.audit.context import AuditContext, locked_packages
from bundle.lock import load_lock
from tests.conftest import require_tool

REPO = Path(__file__).resolve().parents[1]
AOT = "/opt/venv/lib/python3.12/site-packages/flashinfer/data/aot"
NVCC = "/opt/venv/lib/python3.12/site-packages/nvidia/cu13/bin/nvcc"
CHOICE = {"moe_runner_backend": "flashinfer_mxfp4", "sm120_sparse_mla_backend": "flashinfer"}


TILELANG = "/opt/bundle/tilelang-cache/0.1.12/linux-x86_64/kernels"
SPLITS = checks_kernels.tilelang_indexer_splits()
# SGLang's flashinfer_mxfp4 runner as sglang/srt/layers/moe/moe_runner/flashinfer_cutlass.py shapes it:
# a registered dispatcher, the cutlass function it calls, MXFP8 activations and MXFP4 weights.
SGLANG_CALLS = """
@register_fused_func("none", "flashinfer_mxfp4")
def fused_experts_none_to_flashinfer_mxfp4(dispatch_output, quant_info, runner_config):
    return _fused_experts_flashinfer_mxfp4_cutlass(dispatch_output, quant_info, runner_config)

def _fused_experts_flashinfer_mxfp4_cutlass(dispatch_output, quant_info, runner_config):
    flashinfer_cutlass_fused_moe, ActivationType = _flashinfer_cutlass_fused_moe()
    x = dispatch_output.hidden_states
    use_mxfp8_act_scaling = quant_info.mxfp4_weight_global_scale is not None
    if use_mxfp8_act_scaling:
        x, input_sf = mxfp8_quantize(x, is_sf_swizzled_layout=True, alignment=32)
        fc1 = quant_info.w13_weight.view(torch.int64)
    flashinfer_cutlass_fused_moe(input=x, fc1_expert_weights=fc1, output_dtype=torch.bfloat16,
                                 input_sf=input_sf, use_mxfp8_act_scaling=use_mxfp8_act_scaling)
"""
# A planted second path: the same runner called with bf16 activations (FlashInfer's bf16 x fp4 runner).
PLANTED_BF16 = """
@register_fused_func("none", "flashinfer_mxfp4")
def fused_experts_bf16(dispatch_output, quant_info, runner_config):
    x = dispatch_output.hidden_states
    cutlass_fused_moe(input=x, fc1_expert_weights=quant_info.w13_weight, output_dtype=torch.bfloat16)
"""


def _sound_facts() -> dict:
    """What the probe reports for a sound image: one nvcc of the lock, cuda.h 13.0, norm and the cut
    fused MoE prebuilt and sound, every TileLang indexer kernel in its cache with sm_120a SASS."""
    norm, moe = f"{AOT}/norm/norm.so", f"{AOT}/fused_moe_120/fused_moe_120.so"
    elf = {"present": True, "needed": ["libcudart.so.13", "libcuda.so.1"], "driver_calls": ["cuGetErrorString"],
           "unresolved": ["libcuda.so.1"]}
    tl = {f"fp8_paged_mqa_logits/split_kv={s}": {"library": f"{TILELANG}/k{s}/executable.so"} for s in SPLITS}
    return {
        "kernels": {
            "nvcc": [{"path": NVCC, "release": "13.0", "version": "13.0.88"}],
            "cuda_h_version": 13000,
            "manifest": {"arch": "12.0a", "modules": {
                "norm": {"path": norm, "size": 1, "generator": "g"},
                "fused_moe_120": {"path": moe, "size": 1, "generator": "kernels_narrow:gen_fused_moe_120_module",
                                  "pairs_kept": ["fp8_fp4"], "pairs_left_out": ["bf16_fp4", "fp16_fp16"]}},
                "tilelang": {"arch": "sm_120a", "kernels": tl}},
            "modules": {"norm": elf, "fused_moe_120": elf},
            "lookup": {"norm": {"is_aot": True, "path": norm}, "fused_moe_120": {"is_aot": True, "path": moe}},
            "fused_moe": {"fused_moe_120": {
                "load": {"rtld_now": True, "functions": {"init": True, "set_deepgemm_jit_include_dirs": True}},
                "flashinfer_api": {"params": ["input", "fc1_expert_weights", "output_dtype", "input_sf",
                                              "use_mxfp8_act_scaling"],
                                   "module_functions": ["init", "set_deepgemm_jit_include_dirs"]},
                "sglang_calls": {"path": "/site/sglang/srt/layers/moe/moe_runner/flashinfer_cutlass.py",
                                 "source": SGLANG_CALLS}}},
            "tilelang": {name: {"present": True, "needed": ["libc.so.6"], "driver_calls": [], "unresolved": []}
                         for name in tl},
        },
        "libraries": {"libraries": [{"path": p, "size": 1, "cubins": ["sm_120a"], "ptx": []}
                                    for p in [norm, moe, *(k["library"] for k in tl.values())]]},
        "serverargs": {"tp4/server": {"ok": True, "resolved": CHOICE}},
    }


def _run(facts: dict, check=checks_kernels.kernels):
    lock = load_lock()
    ctx = AuditContext(image="x", lock=lock, packages=locked_packages(lock), overlay=None, commands=[],
                       config_name="bundle.yaml", model_source="", facts=facts)
    return check(ctx)


def _fails(findings) -> list[str]:
    return [f.what for f in findings if f.level == Level.FAIL]


def test_the_sound_image_passes_and_the_predicted_modules_not_built_are_warned_as_first_start_work():
    summary, findings = _run(_sound_facts())
    assert _fails(findings) == []
    warned = sorted(f.what.split(" ")[0] for f in findings if f.level == Level.WARN)
    assert warned == sorted(set(kernels_jit.needed_by(CHOICE)) - {"fused_moe_120"}) == [
        "mxfp8_quantization_sm100", "sampling", "sparse_mla_sm120"]
    assert "2 module(s) prebuilt for 12.0a (fused_moe_120, norm), 2 sound" in summary
    assert f"{len(SPLITS)} TileLang indexer kernel(s) prebuilt, {len(SPLITS)} sound" in summary
    _, tool = _run(_sound_facts(), checks_kernels.toolchain)
    assert _fails(tool) == []


def _planted(fault: str) -> dict:
    facts = copy.deepcopy(_sound_facts())
    k, lib = facts["kernels"], facts["libraries"]["libraries"][0]
    if fault == "missing":
        k["modules"]["norm"] = {"present": False}
    elif fault == "wrong-arch":
        lib["cubins"] = ["sm_90a"]
    elif fault == "ptx":
        lib["ptx"] = ["sm_120a"]
    elif fault == "no-libcuda":
        k["modules"]["norm"]["needed"] = ["libcudart.so.13"]
    elif fault == "unresolved":
        k["modules"]["norm"]["unresolved"] = ["libcuda.so.1", "libnvshmem_host.so.3"]
    elif fault == "not-aot":
        k["lookup"]["norm"] = {"is_aot": False, "path": "/home/x/.cache/flashinfer/norm/norm.so"}
    return facts


@pytest.mark.parametrize("fault,expected", [
    ("missing", "norm: the kernels layer built it but its library is missing"),
    ("wrong-arch", "norm: no sm_120a SASS (cubins sm_90a): built for another arch"),
    ("ptx", "norm: holds PTX (sm_120a) the 580 driver would compile at first use"),
    ("no-libcuda", "norm: calls the driver API (cuGetErrorString, ...) without libcuda.so.1 in NEEDED"),
    ("unresolved", "norm: links against libnvshmem_host.so.3, not in the image"),
    ("not-aot", "norm: FlashInfer's lookup does not find it prebuilt"),
])
def test_a_planted_kernel_fault_fails_naming_the_module(fault, expected):
    _, findings = _run(_planted(fault))
    fails = [f for f in findings if f.level == Level.FAIL]
    assert [f.what for f in fails if f.what.startswith(expected)], _fails(findings)
    assert all(f.fix for f in fails)


def test_a_second_nvcc_another_release_and_headers_of_another_line_each_fail():
    facts = _sound_facts()
    facts["kernels"]["nvcc"].append({"path": "/usr/local/cuda-13.5/bin/nvcc", "release": "13.5",
                                     "version": "13.5.37"})
    facts["kernels"]["cuda_h_version"] = 13050
    _, findings = _run(facts, checks_kernels.toolchain)
    fails = _fails(findings)
    assert any(f.startswith("2 CUDA compilers: ") and "13.5.37" in f for f in fails), fails
    assert "/usr/local/cuda-13.5/bin/nvcc is nvcc 13.5.37, the lock's [cuda] pins 13.0.88" in fails
    assert any("CUDA_VERSION 13050, not the [cuda] line 13.0" in f for f in fails), fails


def test_an_image_without_the_kernels_layer_is_a_warning_not_a_failure():
    facts = _sound_facts()
    facts["kernels"]["manifest"] = None
    _, findings = _run(facts)
    assert _fails(findings) == []
    assert any(f.what.startswith("no kernels layer") for f in findings)


def test_the_probe_reads_a_driver_call_without_libcuda_from_a_real_library(tmp_path):
    """The probe's ELF reading on a library built here: a driver call left undefined, no libcuda.so.1
    in NEEDED (what an empty link stub under --as-needed gives); then the same call linked against a
    stub exporting it, with the driver's soname (docker/cuda-home.sh's), needs libcuda.so.1."""

    from bundle.images.audit import probe

    for tool in ("cc", "readelf", "nm"):
        require_tool(tool, "apt-get install build-essential binutils")
    (tmp_path / "m.c").write_text("int cuInit(unsigned);\nint f(void) { return cuInit(0); }\n")
    (tmp_path / "stub.c").write_text("int cuInit(void) { return 999; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", tmp_path / "bare.so", tmp_path / "m.c"], check=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", tmp_path / "libcuda.so",
                    tmp_path / "stub.c"], check=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,--as-needed", "-o", tmp_path / "linked.so", tmp_path / "m.c",
                    f"-L{tmp_path}", "-lcuda"], check=True)
    bare, linked = probe._elf(str(tmp_path / "bare.so")), probe._elf(str(tmp_path / "linked.so"))
    assert bare["driver_calls"] == ["cuInit"] and "libcuda.so.1" not in bare["needed"]
    assert linked["driver_calls"] == ["cuInit"] and "libcuda.so.1" in linked["needed"]
    assert linked["unresolved"] == ["libcuda.so.1"]  # the host brings it


def test_a_module_needing_a_cuda_wheels_library_resolves_where_torch_has_loaded_it(tmp_path):
    """The kernels layer's modules need libcudart.so.13, which lives in the CUDA wheels' folder, not on
    ld.so's paths: FlashInfer imports torch first, whose RUNPATH names that folder. The audit's ldd
    must look there too (a real module went FAIL "not in the image" without it), and only there."""
    from bundle.images.audit import probe

    for tool in ("cc", "readelf", "ldd"):
        require_tool(tool, "apt-get install build-essential binutils")
    wheel_lib = tmp_path / "nvidia" / "cu13" / "lib"
    wheel_lib.mkdir(parents=True)
    (tmp_path / "rt.c").write_text("int rt(void) { return 1; }\n")
    (tmp_path / "m.c").write_text("int rt(void);\nint f(void) { return rt(); }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcudartx.so.13", "-o", wheel_lib / "libcudartx.so.13",
                    tmp_path / "rt.c"], check=True)
    (wheel_lib / "libcudartx.so").symlink_to("libcudartx.so.13")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", tmp_path / "norm.so", tmp_path / "m.c", f"-L{wheel_lib}",
                    "-lcudartx"], check=True)
    assert probe._elf(str(tmp_path / "norm.so"))["unresolved"] == ["libcudartx.so.13"]
    assert probe._elf(str(tmp_path / "norm.so"), [str(wheel_lib)])["unresolved"] == []


def test_the_tilelang_splits_are_the_ones_the_kernels_layer_compiles():
    """docker/tilelang-prebuild.py (run in the image, no bundle import) and the audit count the same
    split_kv values: SGLang's max(1, 256 // rows) for every row count, 31 of them."""
    spec = importlib.util.spec_from_file_location("prebuild", REPO / "docker" / "tilelang-prebuild.py")
    prebuild = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prebuild)
    assert prebuild.SPLITS == SPLITS and len(SPLITS) == 31 and SPLITS[0] == 256 and SPLITS[-1] == 1


@pytest.mark.parametrize("fault,expected", [
    ("tl-missing", "TileLang indexer kernel(s) not prebuilt, compiled at the first start: "
                   "fp8_paged_mqa_logits/split_kv=21"),
    ("tl-wrong-arch", "tilelang fp8_paged_mqa_logits/split_kv=8: no sm_120a SASS (cubins sm_90a)"),
    ("tl-gone", "tilelang fp8_paged_mqa_logits/split_kv=8: the kernels layer built it but its library is missing"),
    ("moe-rtld", "fused_moe_120: does not load with every symbol resolved (RTLD_NOW): OSError: undefined symbol"),
    ("moe-function", "fused_moe_120: lacks init, which FlashInfer's get_cutlass_fused_moe_module calls"),
    ("moe-keyword", "fused_moe_120: SGLang's call at /site/sglang/srt/layers/moe/moe_runner/flashinfer_cutlass.py:13 "
                    "passes use_mxfp8_act_scaling, which FlashInfer's cutlass_fused_moe does not take"),
    ("moe-pair", "fused_moe_120: SGLang's flashinfer_mxfp4 call at /site/sglang/srt/layers/moe/moe_runner/"
                 "flashinfer_cutlass.py:5 asks for bf16 x fp4 (moe_gemm_kernels_bf16_fp4.cu), left out of this "
                 "image's fused MoE (kept: fp8_fp4)"),
])
def test_a_planted_tilelang_or_fused_moe_fault_fails_naming_it(fault, expected):
    facts = copy.deepcopy(_sound_facts())
    k = facts["kernels"]
    tl, moe = k["manifest"]["tilelang"]["kernels"], k["fused_moe"]["fused_moe_120"]
    if fault == "tl-missing":
        del tl["fp8_paged_mqa_logits/split_kv=21"]
    elif fault == "tl-wrong-arch":
        lib = tl["fp8_paged_mqa_logits/split_kv=8"]["library"]
        next(x for x in facts["libraries"]["libraries"] if x["path"] == lib)["cubins"] = ["sm_90a"]
    elif fault == "tl-gone":
        k["tilelang"]["fp8_paged_mqa_logits/split_kv=8"] = {"present": False}
    elif fault == "moe-rtld":
        moe["load"] = {"rtld_now": False, "error": "OSError: undefined symbol: _ZN12tensorrt_llm7kernels"}
    elif fault == "moe-function":
        moe["load"]["functions"]["init"] = False
    elif fault == "moe-keyword":
        moe["flashinfer_api"]["params"].remove("use_mxfp8_act_scaling")
    elif fault == "moe-pair":
        moe["sglang_calls"]["source"] = PLANTED_BF16 + SGLANG_CALLS
    _, findings = _run(facts)
    fails = [f for f in findings if f.level == Level.FAIL]
    assert [f.what for f in fails if f.what.startswith(expected)], _fails(findings)
    assert all(f.fix for f in fails)


def test_sglangs_own_flashinfer_mxfp4_call_asks_for_the_kept_pair_only():
    """The call-site reading on the planted fixture: the real-shaped path is fp8 x fp4, the planted bf16
    call bf16 x fp4; a source with no such call is itself a failure (nothing to check the cut against)."""
    from bundle.images.audit import moe_calls

    assert [(c.function, c.pair) for c in moe_calls.calls(SGLANG_CALLS)] == [
        ("_fused_experts_flashinfer_mxfp4_cutlass", "fp8_fp4")]
    assert [c.pair for c in moe_calls.calls(PLANTED_BF16 + SGLANG_CALLS)] == ["bf16_fp4", "fp8_fp4"]
    facts = _sound_facts()
    facts["kernels"]["fused_moe"]["fused_moe_120"]["sglang_calls"]["source"] = "def f():\n    pass\n"
    _, findings = _run(facts)
    assert any(f.startswith("fused_moe_120: no cutlass_fused_moe call found") for f in _fails(findings))


def test_the_probe_reads_the_cubin_a_library_keeps_as_data(tmp_path):
    """TileLang's executable.so holds its kernel's cubin as data, not in a fatbin section cuobjdump
    reads: the probe carves each CUDA ELF (EM_CUDA, ELF64; its size from the section and program header
    tables) and runs cuobjdump on it, reporting under the library's path."""
    from bundle.images.audit import probe

    head = bytearray(64)
    head[0:4], head[4] = b"\x7fELF", 2
    head[0x12:0x14] = (190).to_bytes(2, "little")
    head[0x28:0x30] = (100).to_bytes(8, "little")  # section headers at 100, 2 of 64 bytes: ends at 228
    head[0x3A:0x3C], head[0x3C:0x3E] = (64).to_bytes(2, "little"), (2).to_bytes(2, "little")
    head[0x20:0x28] = (228).to_bytes(8, "little")  # program headers after them, 1 of 56: ends at 284
    head[0x36:0x38], head[0x38:0x3A] = (56).to_bytes(2, "little"), (1).to_bytes(2, "little")
    cubin = bytes(head) + b"\0" * (284 - 64)
    library = tmp_path / "executable.so"
    library.write_bytes(b"\x7fELF host library" + b"\0" * 500 + cubin + b"trailing data")
    assert probe._embedded_cubins(str(library)) == [cubin]
    cuobjdump = tmp_path / "cuobjdump"  # names the arch only for a file of exactly the cubin's size
    cuobjdump.write_text('#!/bin/sh\n[ "$1" = --list-elf ] && [ "$(wc -c < "$2")" -eq 284 ] '
                         '&& echo "ELF file    1: x.sm_120a.cubin"\nexit 0\n')
    cuobjdump.chmod(0o755)
    got = probe._objdump_embedded(str(cuobjdump), str(library))
    assert got["cubins"] == ["sm_120a"] and got["path"] == str(library) and got["ptx"] == []
