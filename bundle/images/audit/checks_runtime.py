"""What runs without a GPU: every top-level module of the lock's distributions imports (or is listed
with why it cannot), and the server's and the router's command lines answer --help."""

from __future__ import annotations

import re

from bundle.images.audit.context import AuditContext
from bundle.findings import Finding, Level

# An import that fails for one of these reasons needs a GPU (or its driver) and is expected here.
_NEEDS_GPU = re.compile(r"libcuda|libnvidia|CUDA|cuda|GPU|NVML|nvml|driver|accelerator|nvrtc|device", re.I)
# The driver's libraries, which only the NVIDIA container runtime brings into a container.
_DRIVER_LIB = re.compile(r"lib(cuda|nvidia-ml|nvidia-[a-z-]+)\.so(\.\d+)*")
# Modules the server cannot start without: failing to import for any other reason is a FAIL.
CORE = {"sglang", "torch", "transformers", "triton", "flashinfer", "sgl_kernel", "tilelang", "nixl",
        "sglang_router", "smg", "numpy", "fastapi", "uvicorn", "tokenizers", "safetensors"}


def imports(ctx: AuditContext) -> tuple[str, list[Finding]]:
    facts = ctx.facts.get("imports") or {}
    if "probe_error" in facts or "modules" not in facts:
        raise RuntimeError(f"the probe could not import: {facts.get('probe_error', 'no facts')}")
    mods = facts["modules"]
    failed = [m for m in mods if not m["ok"]]
    findings = []
    for m in failed:
        reason, detail = m.get("error", ""), m.get("detail", "")
        driver = _DRIVER_LIB.search(detail)
        if driver:
            findings.append(Finding(Level.INFO, f"{m['module']}: cannot import without a GPU: "
                                                 f"{driver.group(0)} (the NVIDIA driver) is not here"))
        elif _NEEDS_GPU.search(reason):
            findings.append(Finding(Level.INFO, f"{m['module']}: cannot import without a GPU: {reason}"))
        elif m["module"] in CORE:
            findings.append(Finding(Level.FAIL, f"{m['module']} does not import: {reason}",
                                    fix="the image's closure is broken: rebuild from the lock, check `pip check`"))
        else:
            findings.append(Finding(Level.WARN, f"{m['module']} does not import: {reason}",
                                    fix="harmless unless the server imports it; see the reason"))
    return f"{len(mods) - len(failed)} of {len(mods)} top-level modules import without a GPU", findings


def helps(ctx: AuditContext) -> tuple[str, list[Finding]]:
    facts = ctx.facts.get("helps") or {}
    findings = []
    wanted = {"server": "sglang.launch_server"}
    if ctx.router_module:
        wanted["router"] = ctx.router_module
    for label, module in wanted.items():
        got = facts.get(label)
        if got is None:
            findings.append(Finding(Level.FAIL, f"python -m {module} --help was not run", fix="see the probe's output"))
        elif got.get("module") != module:
            findings.append(Finding(Level.FAIL, f"the probe ran {got.get('module')}, the topology runs {module}",
                                    fix="rebuild the image from this lock"))
        elif got["returncode"] != 0:
            tail = " / ".join(got.get("tail") or [])
            findings.append(Finding(Level.FAIL, f"python -m {module} --help exited {got['returncode']}: {tail}",
                                    fix="the image cannot start this program: rebuild it from the lock"))
    ok = [f"{facts[k]['module']} ({facts[k]['seconds']} s)" for k in wanted if k in facts
          and facts[k].get("returncode") == 0]
    return ("--help runs: " + ", ".join(ok)) if ok else "--help does not run", findings
