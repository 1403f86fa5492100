"""The kernels layer's compile cost: the fused MoE cut to MXFP8 x MXFP4 (docker/kernels_narrow.py)
against FlashInfer's full sm_120 fused MoE (gen_cutlass_fused_moe_sm120_module), in the same run, in
the framework image, from empty workspaces, as CPU-seconds of nvcc and the host compiler and wall
time; then the rest of the layer (the other FlashInfer modules, TileLang's indexer kernels).

    .venv/bin/python benchmarks/kernels_layer.py FRAMEWORK_IMAGE [--jobs N] [--full-sample K]

--full-sample K: compile about K of the full module's sources, stratified by kind (the dtype pairs' GEMM
files, each SM's generated tile files, the rest: each kind its share, at least one, built as its own
spec) and extrapolate each kind's CPU-seconds by its own count (the full module is about
4,500 CPU-s, most of an hour on 2 cores); 0 (default) compiles all of it. The printed line says
which. Prints a table and appends one JSON line to runs/benchmarks/kernels_layer.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Runs inside the image: one spec, from an empty workspace, its children's CPU-seconds.
_INSIDE = r"""
import dataclasses, importlib, json, os, sys, time
sys.path.insert(0, "/src")
from flashinfer.jit import core
which, sample = sys.argv[1], int(sys.argv[2])
if which == "narrow":
    import kernels_narrow
    spec = kernels_narrow.gen_fused_moe_120_module()
elif which == "full":
    from flashinfer.jit.fused_moe import gen_cutlass_fused_moe_sm120_module
    spec = gen_cutlass_fused_moe_sm120_module()
else:
    module, function = which.split(":")
    spec = getattr(importlib.import_module(module), function)()
total = len(spec.sources)


def kind(source):
    # FlashInfer's files differ in cost by kind: a dtype pair's GEMM file, a generated tile file of one
    # SM (its folder: cutlass_instantiations/<sm>/), the binding and common code.
    import re
    name = str(source)
    if "moe_gemm_kernels_" in name:
        return "pair"
    m = re.search(r"cutlass_instantiations/(\d+)/", name)
    return f"tiles sm{m.group(1)}" if m else "other"


def cpu_now():
    c = os.times()
    return c.children_user + c.children_system


t, c0 = time.monotonic(), cpu_now()
strata = {}
if sample:
    # Stratified: each kind gets its share of the sample (at least one), spread over its files, built as
    # its own spec; its CPU-seconds scale by its own count, so light and heavy kinds are not mixed.
    groups = {}
    for source in spec.sources:
        groups.setdefault(kind(source), []).append(source)
    for name, files in groups.items():
        k = max(1, round(sample * len(files) / total))
        chosen = files[::max(1, len(files) // k)][:k]
        before = cpu_now()
        core.build_jit_specs([dataclasses.replace(spec, name=f"{spec.name}_{name.replace(' ', '_')}",
                                                  sources=chosen)], verbose=False, skip_prebuilt=False)
        used = cpu_now() - before
        strata[name] = {"files": len(files), "compiled": len(chosen), "cpu_s": round(used, 1),
                        "cpu_s_extrapolated": round(used * len(files) / len(chosen), 1)}
    compiled = sum(g["compiled"] for g in strata.values())
else:
    core.build_jit_specs([spec], verbose=False, skip_prebuilt=False)
    compiled = total
if which == "narrow":
    kernels_narrow.complete(spec)  # the left-out symbols' definitions and the relink: part of its cost
c1 = cpu_now()
result = {"which": which, "sources": total, "compiled": compiled, "cpu_s": round(c1 - c0, 1),
          "wall_s": round(time.monotonic() - t, 1)}
if strata:
    result["strata"] = strata
    result["cpu_s_extrapolated"] = round(sum(g["cpu_s_extrapolated"] for g in strata.values()), 1)
print("RESULT " + json.dumps(result))
"""

# The rest of the layer, as kernels_jit.default_modules() lists it (FlashInfer's own generators).
REST = ("flashinfer.jit.mla:gen_sparse_mla_sm120_module",
        "flashinfer.jit.fp8_quantization:gen_mxfp8_quantization_sm100_module",
        "flashinfer.jit.sampling:gen_sampling_module", "flashinfer.jit.mhc:gen_mhc_module")


def run(image: str, which: str, jobs: int, sample: int = 0) -> dict:
    cmd = ["docker", "run", "--rm", "--user", "0", "--entrypoint", "python",
           "-v", f"{REPO / 'docker'}:/src:ro", "-e", "FLASHINFER_CUDA_ARCH_LIST=12.0a",
           "-e", "FLASHINFER_WORKSPACE_BASE=/tmp/ws", "-e", f"MAX_JOBS={jobs}", image, "-c", _INSIDE, which, str(sample)]
    t = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode or not line:
        sys.exit(f"{which}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-2000:]}")
    result = json.loads(line[7:])
    result["container_wall_s"] = round(time.monotonic() - t, 1)

    print(f"  {which}: {json.dumps(result)}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("image")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--full-sample", type=int, default=0)
    parser.add_argument("--skip-rest", action="store_true", help="only the two fused MoE builds")
    args = parser.parse_args()
    narrow = run(args.image, "narrow", args.jobs)
    full = run(args.image, "full", args.jobs, args.full_sample)
    full_cpu = full.get("cpu_s_extrapolated", full["cpu_s"])
    rest = [] if args.skip_rest else [run(args.image, target, args.jobs) for target in REST]
    record = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "image": args.image, "jobs": args.jobs,
              "cpus": os.cpu_count(), "narrow": narrow, "full": full, "rest": rest,
              "ratio_cpu_narrow_over_full": round(narrow["cpu_s"] / full_cpu, 3)}
    how = (f"{full['compiled']} of {full['sources']} sources compiled, extrapolated by kind"
           if args.full_sample else "all of it compiled")
    print(f"fused MoE, MXFP8 x MXFP4 cut: {narrow['cpu_s']:.0f} CPU-s, {narrow['wall_s']:.0f} s wall; "
          f"FlashInfer's full module: {full_cpu:.0f} CPU-s ({how}); ratio {record['ratio_cpu_narrow_over_full']}")
    if rest:
        layer = narrow["cpu_s"] + sum(r["cpu_s"] for r in rest)
        print(f"the layer's FlashInfer modules with the cut fused MoE: {layer:.0f} CPU-s "
              f"(wall on {args.jobs} jobs: {narrow['wall_s'] + sum(r['wall_s'] for r in rest):.0f} s)")
    out = REPO / "runs" / "benchmarks" / "kernels_layer.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
