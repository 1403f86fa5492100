"""Compile FlashInfer JIT modules for the lock's arch at image build time, into the folder its loader
checks before the JIT cache: flashinfer/data/aot/<name>/<name>.so.

    python kernels-build.py NAME=MODULE:FUNCTION ...   (bundle/images/kernels_jit.py writes them)

Each module is FlashInfer's own JitSpec from its own generator, built by its own build.ninja
(build_jit_specs: one ninja over every module, MAX_JOBS jobs); the workspace is a BuildKit cache
mount, so a rebuild with the same flags recompiles nothing. Then FlashInfer's lookup, asked afresh
in a new process with JIT disabled, must report each one as prebuilt (is_aot), and a manifest
(/opt/bundle/kernels.json: each module's path, size and generator; the seconds) says what was built:
`bundle audit` reads it.
"""

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

# The base layer's link stub of the driver (docker/cuda-home.sh), under the driver's soname for the
# RTLD_NOW check: this machine has no driver, the GPU host brings libcuda.so.1.
DRIVER_STUB = "/usr/local/cuda/lib64/stubs/libcuda.so"


def main(words: list[str]) -> None:
    from flashinfer.jit import core, env

    specs, targets = {}, {}
    for word in words:
        name, target = word.split("=", 1)
        module, function = target.split(":")
        spec = getattr(importlib.import_module(module), function)()
        if spec.name != name:
            sys.exit(f"{target} builds {spec.name!r}, not {name!r}")
        specs[name], targets[name] = spec, target
    print(f"kernels: {', '.join(specs)} for {os.environ.get('FLASHINFER_CUDA_ARCH_LIST')} with "
          f"MAX_JOBS={os.environ.get('MAX_JOBS')} ({os.cpu_count()} CPUs)", flush=True)
    started = time.monotonic()
    cpu0 = os.times()
    # verbose: ninja's own `[done/total] command` lines stream out, the build's progress (the fused
    # MoE alone is most of an hour on 2 cores); quiet, FlashInfer holds them until ninja ends.
    core.build_jit_specs(list(specs.values()), verbose=True, skip_prebuilt=False)
    # A generator module may finish its spec after the first link (kernels_narrow: the left-out pairs'
    # symbols); what it returns goes into the manifest.
    extra = {}
    for name, spec in specs.items():
        complete = getattr(importlib.import_module(targets[name].split(":")[0]), "complete", None)
        if complete is not None:
            extra[name] = complete(spec)
    cpu1 = os.times()
    manifest = {"arch": os.environ.get("FLASHINFER_CUDA_ARCH_LIST"),
                "seconds": round(time.monotonic() - started, 1),
                "cpu_seconds": round((cpu1.children_user + cpu1.children_system)
                                     - (cpu0.children_user + cpu0.children_system), 1),
                "modules": {}}
    for name, spec in specs.items():
        dst = env.FLASHINFER_AOT_DIR / name / f"{name}.so"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(spec.jit_library_path, dst)
        manifest["modules"][name] = {"path": str(dst), "size": dst.stat().st_size, "generator": targets[name],
                                     **extra.get(name, {})}
        print(f"  {name}: {dst} ({dst.stat().st_size / 1e6:.1f} MB)", flush=True)
    # FlashInfer's own lookup, in a process that never saw the build: prebuilt, nothing to rebuild;
    # and every symbol of each module resolved at load (RTLD_NOW), the driver's from its stub.
    check = ("import ctypes, importlib, os, sys, torch, tvm_ffi\n"
             "for w in sys.argv[2:]:\n"
             "    n, t = w.split('=', 1); m, f = t.split(':')\n"
             "    s = getattr(importlib.import_module(m), f)()\n"
             "    assert s.is_aot and s.is_compiled, f'{n}: FlashInfer does not find it prebuilt'\n"
             "    if n in sys.argv[1].split(','):\n"
             "        ctypes.CDLL(str(s.get_library_path()), mode=os.RTLD_NOW)\n")
    with tempfile.TemporaryDirectory() as driver:
        if os.path.exists(DRIVER_STUB):
            os.symlink(DRIVER_STUB, os.path.join(driver, "libcuda.so.1"))
        # RTLD_NOW for the modules a generator finished after linking (kernels_narrow's cut, whose
        # left-out symbols must all be defined); FlashInfer's own modules load as its loader loads them.
        subprocess.run([sys.executable, "-c", check, ",".join(extra), *words],
                       check=True,
                       env={**os.environ, "FLASHINFER_DISABLE_JIT": "1", "HOME": "/nonexistent",
                            "LD_LIBRARY_PATH": ":".join(filter(None, [driver, os.environ.get("LD_LIBRARY_PATH")]))})
    with open("/opt/bundle/kernels.json", "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"kernels: {len(specs)} module(s) in {manifest['seconds']:.0f} s "
          f"({manifest['cpu_seconds']:.0f} CPU-s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
