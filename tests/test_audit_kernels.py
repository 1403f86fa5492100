"""The audit's toolchain and kernels checks on the facts the probe reports (in-process, no image):
each planted fault is a FAIL naming the module or the compiler, with a fix; the real image's facts
are checked by tests/test_audit.py's planted audit (Docker tier)."""

from __future__ import annotations

import copy
import subprocess

import pytest

from bundle.findings import Level
from bundle.images import kernels_jit
from bundle.images.audit import checks_kernels
from bundle.images.audit.context import AuditContext, locked_packages
from bundle.lock import load_lock
from tests.conftest import require_tool

AOT = "/opt/venv/lib/python3.12/site-packages/flashinfer/data/aot"
NVCC = "/opt/venv/lib/python3.12/site-packages/nvidia/cu13/bin/nvcc"
CHOICE = {"moe_runner_backend": "flashinfer_mxfp4", "sm120_sparse_mla_backend": "flashinfer"}


def _sound_facts() -> dict:
    """What the probe reports for CI's image: one nvcc of the lock, cuda.h 13.0, norm prebuilt and sound."""
    norm = f"{AOT}/norm/norm.so"
    return {
        "kernels": {
            "nvcc": [{"path": NVCC, "release": "13.0", "version": "13.0.88"}],
            "cuda_h_version": 13000,
            "manifest": {"arch": "12.0a", "modules": {"norm": {"path": norm, "size": 1, "generator": "g"}}},
            "modules": {"norm": {"present": True, "needed": ["libcudart.so.13", "libcuda.so.1"],
                                 "driver_calls": ["cuGetErrorString"], "unresolved": ["libcuda.so.1"]}},
            "lookup": {"norm": {"is_aot": True, "path": norm}},
        },
        "libraries": {"libraries": [{"path": norm, "size": 1, "cubins": ["sm_120a"], "ptx": []}]},
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
    assert warned == sorted(kernels_jit.needed_by(CHOICE)) == ["fused_moe_120", "mxfp8_quantization_sm100",
                                                                "sampling", "sparse_mla_sm120"]
    assert "1 module(s) prebuilt for 12.0a (norm), 1 sound" in summary
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
