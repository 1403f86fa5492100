"""Run on a GPU host: FlashInfer modules compiled on a machine without a GPU (docker/kernels-build.py,
the base layer's nvcc and libcuda stub; tests/gpu/build_for_gpu.sh), loaded here by FlashInfer's own
loader with JIT disabled and no compiler on PATH, run on real tensors and compared with plain PyTorch;
then a module built for sm_120a is run here, where the driver must refuse it.

    python tests/gpu/prebuilt_on_gpu.py CARRY_DIR [OUT_JSON]

CARRY_DIR (what build_for_gpu.sh packs): site/ (flashinfer's Python files with the modules in
flashinfer/data/aot/<name>/<name>.so, apache-tvm-ffi) and sm120/<name>.so (a module built for 12.0a).
Prints one JSON document (device, driver, each module's max abs error, the refusal) and writes it to
OUT_JSON when given. Exit 1 when a module fails to load, errs beyond its tolerance, or the sm_120a
module runs instead of being refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import traceback


def _device() -> dict:
    import torch

    props = torch.cuda.get_device_properties(0)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip() if shutil.which("nvidia-smi") else ""
    return {"name": props.name, "capability": f"{props.major}.{props.minor}", "nvidia_smi": smi,
            "torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "nvcc_on_path": shutil.which("nvcc"), "python": sys.version.split()[0]}


def _load(gen_module: str, gen_function: str):
    """FlashInfer's own generator and loader, JIT off: the prebuilt library or an error."""
    import importlib

    spec = getattr(importlib.import_module(gen_module), gen_function)()
    assert spec.is_aot, f"{spec.name}: FlashInfer does not find it prebuilt ({spec.get_library_path()})"
    return spec, spec.build_and_load()


def check_norm() -> dict:
    import torch

    spec, mod = _load("flashinfer.jit.norm", "gen_norm_module")
    torch.manual_seed(0)
    x = torch.randn(257, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    mod.rmsnorm(out, x, w, 1e-6, False)
    torch.cuda.synchronize()
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    err = (out.float() - ref).abs().max().item()
    # bf16 output: one rounding of a value up to ~|ref| max; relative 2^-8 of the largest element.
    tol = ref.abs().max().item() * 2 ** -7
    return {"module": spec.name, "library": str(spec.get_library_path()), "op": "rmsnorm bf16 [257, 4096]",
            "max_abs_err": err, "tolerance": tol, "ok": err <= tol}


def check_sampling() -> dict:
    import torch

    spec, mod = _load("flashinfer.jit.sampling", "gen_sampling_module")
    torch.manual_seed(0)
    logits = torch.randn(64, 32000, device="cuda", dtype=torch.float32)
    k = 50
    # FlashInfer's own calls (flashinfer/sampling.py): a zeroed 1 MiB row-state buffer each.
    states = [torch.zeros(1 << 20, dtype=torch.uint8, device="cuda") for _ in range(2)]
    masked = torch.empty_like(logits)
    mod.top_k_mask_logits(logits, masked, None, k, states[0])
    probs = torch.softmax(logits, -1)
    renorm = torch.empty_like(probs)
    mod.top_k_renorm_probs(probs, renorm, None, k, False, states[1])
    torch.cuda.synchronize()
    kth = logits.topk(k, dim=-1).values[:, -1:]
    ref_masked = torch.where(logits >= kth, logits, torch.full_like(logits, float("-inf")))
    kept = masked.isfinite()
    mask_ok = bool(torch.equal(kept, ref_masked.isfinite()))
    err_mask = (masked[kept] - logits[kept]).abs().max().item() if kept.any() else float("inf")
    pk = torch.where(logits >= kth, probs, torch.zeros_like(probs))
    ref_renorm = pk / pk.sum(-1, keepdim=True)
    err_renorm = (renorm - ref_renorm).abs().max().item()
    return {"module": spec.name, "library": str(spec.get_library_path()),
            "op": f"top_k_mask_logits + top_k_renorm_probs fp32 [64, 32000], k={k}",
            "max_abs_err": max(err_mask, err_renorm), "same_kept_set": mask_ok, "tolerance": 1e-5,
            "ok": mask_ok and max(err_mask, err_renorm) <= 1e-5}


def _check_silu() -> dict:
    import importlib

    import torch

    spec = importlib.import_module("flashinfer.jit.activation").gen_act_and_mul_module("silu")
    assert spec.is_aot, f"{spec.name}: FlashInfer does not find it prebuilt ({spec.get_library_path()})"
    mod = spec.build_and_load()
    torch.manual_seed(0)
    x = torch.randn(257, 2 * 2048, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(257, 2048, device="cuda", dtype=torch.bfloat16)
    mod.silu_and_mul(out, x, False)
    torch.cuda.synchronize()
    a, b = x.float().chunk(2, -1)
    ref = torch.nn.functional.silu(a) * b
    err = (out.float() - ref).abs().max().item()
    tol = ref.abs().max().item() * 2 ** -7
    return {"module": spec.name, "library": str(spec.get_library_path()), "op": "silu_and_mul bf16 [257, 4096]",
            "max_abs_err": err, "tolerance": tol, "ok": err <= tol}


def check_refusal(sm120_dir: str) -> dict:
    """A module built for sm_120a, loaded as FlashInfer loads any module (tvm_ffi.load_module), then
    called: the driver has no kernel image for this GPU."""
    import torch
    import tvm_ffi

    path = os.path.join(sm120_dir, "norm.so")
    out = {"library": path}
    try:
        mod = tvm_ffi.load_module(path)
        out["loaded"] = True
    except Exception as exc:  # noqa: BLE001 - the message is the finding
        return {**out, "loaded": False, "refused": True, "message": f"{type(exc).__name__}: {exc}"[:500]}
    x = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    try:
        mod.rmsnorm(y, x, w, 1e-6, False)
        torch.cuda.synchronize()
        return {**out, "refused": False, "message": "ran: the sm_120a module executed on this GPU"}
    except Exception as exc:  # noqa: BLE001
        msg = f"{type(exc).__name__}: {exc}"
        return {**out, "refused": True, "message": msg[:500],
                "no_kernel_image": "no kernel image is available" in msg}


def main(carry: str, out_json: str | None) -> int:
    site = os.path.join(carry, "site")
    sys.path.insert(0, site)
    os.environ["FLASHINFER_DISABLE_JIT"] = "1"
    os.environ["HOME"] = "/nonexistent"  # no JIT cache to fall back on
    # No compiler: a module FlashInfer did not find prebuilt could not be built here.
    os.environ["PATH"] = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                         if p and not os.path.exists(os.path.join(p, "nvcc")))
    os.environ.pop("CUDA_HOME", None)
    report: dict = {"device": _device(), "modules": [], "built_on": None}
    built = os.path.join(carry, "built.json")
    if os.path.exists(built):
        report["built_on"] = json.load(open(built))
    ok = True
    for check in (check_norm, check_sampling, _check_silu):
        try:
            result = check()
        except Exception as exc:  # noqa: BLE001 - each module reports on its own
            result = {"check": check.__name__, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:500],
                      "tail": traceback.format_exc().strip().splitlines()[-4:]}
        ok &= bool(result.get("ok"))
        report["modules"].append(result)
    refusal = check_refusal(os.path.join(carry, "sm120"))
    report["sm120a_module"] = refusal
    ok &= bool(refusal.get("refused"))
    report["ok"] = ok
    text = json.dumps(report, indent=1)
    print(text)
    if out_json:
        os.makedirs(os.path.dirname(out_json) or ".", exist_ok=True)
        with open(out_json, "w") as f:
            f.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
