"""GPU checks: driver for CUDA 13, GPU count and compute capability, peer-to-peer topology."""

from __future__ import annotations

from bundle.doctor import nvidia_smi
from bundle.doctor.context import MIN_DRIVER_FOR_CUDA_13, REQUIRED_COMPUTE_CAP, HostContext
from bundle.doctor.core import CheckResult, fail, ok, skip, warn

_NO_GPU_FIX = "run the doctor on the GPU host (NVIDIA driver >= 580 installed, `nvidia-smi` working)"


def _no_gpu_facts(ctx: HostContext) -> CheckResult | None:
    """SKIP where no driver is installed (a CPU machine); FAIL where nvidia-smi is there but broken."""
    error = ctx.gpu_error()
    if error is None:
        return None
    if error.installed:
        return fail(f"nvidia-smi does not work: {error}",
                    "fix the NVIDIA driver (a reboot after a driver upgrade, `dmesg | grep -i nvrm`)")
    return skip(f"no GPU here: {error}", _NO_GPU_FIX)


def driver(ctx: HostContext) -> CheckResult:
    unavailable = _no_gpu_facts(ctx)
    if unavailable:
        return unavailable
    versions = sorted({g.driver_version or "unknown" for g in ctx.gpus})
    majors = [nvidia_smi.driver_major(v) for v in versions]
    if any(m is None for m in majors):
        return fail(f"nvidia-smi reported no driver version ({', '.join(versions)})",
                    "reinstall the NVIDIA driver (R580 or newer)", versions=versions)
    if min(majors) < MIN_DRIVER_FOR_CUDA_13:
        return fail(f"driver {', '.join(versions)} is too old for CUDA 13 (needs >= {MIN_DRIVER_FOR_CUDA_13})",
                    "install an R580 or newer data-center driver, then reboot", versions=versions)
    return ok(f"driver {', '.join(versions)} (CUDA 13 needs >= {MIN_DRIVER_FOR_CUDA_13})", versions=versions)


def gpus(ctx: HostContext) -> CheckResult:
    unavailable = _no_gpu_facts(ctx)
    if unavailable:
        return unavailable
    found = ctx.gpus
    details = {"gpus": [{"index": g.index, "name": g.name, "compute_cap": g.compute_cap_text,
                         "memory_total_mib": g.memory_total_mib} for g in found],
               "needed": ctx.gpus_needed}
    wrong_arch = [g for g in found if g.compute_cap != REQUIRED_COMPUTE_CAP]
    want = f"{REQUIRED_COMPUTE_CAP[0]}.{REQUIRED_COMPUTE_CAP[1]}"
    names = ", ".join(sorted({g.name for g in found}))
    problems, fixes = [], []
    if len(found) < ctx.gpus_needed:
        problems.append(f"{len(found)} GPU(s) ({names}); the configured topology uses {ctx.gpus_needed}")
        fixes.append("use a host with enough GPUs or shrink the GPU lists in bundle.yaml")
    if wrong_arch:
        caps = ", ".join(sorted({f"GPU{g.index}={g.compute_cap_text}" for g in wrong_arch}))
        # The driver's own words when such a GPU meets the image's sm_120a-only kernels (recorded on a
        # lent H200, docs/images.md "Built here, run there").
        problems.append(f"compute capability {caps}; the image's kernels are built for sm_120a ({want}) only: "
                        "no kernel image is available for this device")
        fixes.append("run on RTX PRO 6000 Blackwell (sm_120) GPUs, or rebuild the image with "
                     "base.cuda_arch_list in docker/lock.toml set for these GPUs")
    if problems:
        return fail("; ".join(problems), "; ".join(fixes), **details)
    return ok(f"{len(found)} x {names}, compute capability {want}", **details)


def p2p_topology(ctx: HostContext) -> CheckResult:
    unavailable = _no_gpu_facts(ctx)
    if unavailable:
        return unavailable
    topo = ctx.topology
    groups = ctx.gpu_groups or {"all": topo.gpus}
    per_group = {}
    pcie_groups = []
    for name, members in groups.items():
        pairs = topo.pairs(members)
        links = sorted({code for _, _, code in pairs})
        per_group[name] = {"gpus": list(members), "links": links,
                           "cross_socket_pairs": [f"{a}-{b}" for a, b, c in pairs if c == "SYS"]}
        if pairs and topo.pcie_only(members):
            pcie_groups.append(name)
    details = {"groups": per_group, "pcie_safe_collectives": ctx.pcie_safe_collectives}
    if not pcie_groups:
        return ok("NVLink between the GPUs of every group: NCCL P2P and custom all-reduce are safe", **details)
    what = f"PCIe only (no NVLink) within {', '.join(pcie_groups)}"
    if ctx.pcie_safe_collectives == "auto":
        return ok(f"{what}; levers.pcie_safe_collectives: auto decides from the NCCL all-reduce "
                  f"(check nccl) at launch", **details)
    if ctx.pcie_safe_collectives:
        return ok(f"{what}; the config sets NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce", **details)
    return warn(f"{what}: NCCL P2P and SGLang's custom all-reduce are known to hang on such boxes",
                "set levers.pcie_safe_collectives: auto (decided by the NCCL check) or true in bundle.yaml "
                "(NCCL_P2P_DISABLE=1, --disable-custom-all-reduce)", **details)
