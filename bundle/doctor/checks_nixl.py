"""A real NIXL transfer between two agents (UCX backend), and the UCX transport it used.

Inside the worker image on a GPU host (VRAM to VRAM, prefill GPU to decode GPU, with the container
settings compose gives the workers); inside the image with DRAM where there is no GPU; with this
host's Python where there is no image. The summary always says which of these ran.
"""

from __future__ import annotations

from bundle.doctor import nixl_check
from bundle.doctor.context import HostContext
from bundle.doctor.core import CheckResult, fail, ok, skip, warn
from bundle.errors import EnvironmentProblem


def _image_here(ctx: HostContext) -> str | None:
    if not ctx.image:
        return None
    from bundle.stack import engine

    try:
        _ = ctx.engine  # raises BundleError without an engine
        return ctx.image if engine.image_facts(ctx.image) is not None else None
    except EnvironmentProblem:
        return None


def _gpu_pair(ctx: HostContext) -> tuple[int, int]:
    count = len(ctx.gpus)
    a, b = ctx.nixl_gpus
    # Fewer GPUs than the topology wants: still test across two GPUs where there are two.
    if a >= count or b >= count:
        a, b = 0, min(1, count - 1)
    return a, b


def nixl_transfer(ctx: HostContext) -> CheckResult:
    has_gpu = ctx.gpu_problem() is None
    image = _image_here(ctx)
    if image:
        if has_gpu:
            result = nixl_check.run_in_image(image, mem="VRAM", gpus=_gpu_pair(ctx))
        else:
            result = nixl_check.run_in_image(image, mem="DRAM", gpus=None)
    elif ctx.host_python_nixl and nixl_check.host_python_can_probe():
        result = nixl_check.run_on_host(mem="DRAM")
    else:
        why = f"the image {ctx.image} is not here" if ctx.image else "no image given"
        return skip(f"{why}, and nixl_cu13 does not import in this host's Python",
                    "build or pull the image (`make image` / `bundle pull`), then run the doctor again")

    details = result.as_dict()
    where = f"{result.mem} to {result.mem} in {result.where}"
    if result.gpus and result.mem == "VRAM":
        where += f" (GPU {result.gpus[0]} -> GPU {result.gpus[1]})"
    if not result.ok:
        reason = result.error or f"state {result.state}, bytes equal: {result.bytes_equal}"
        return fail(f"NIXL transfer failed, {where}: {reason}",
                    "see `details.output_tail` in --json; check UCX_TLS and that the container has "
                    "ipc: host and memlock unlimited", output_tail=result.output_tail, **details)
    transport = result.ucx_config or "unknown transport"
    verdict, why = nixl_check.transport_verdict(result)
    summary = f"{result.size} B moved {where} via UCX {transport} ({result.ucx_protocol or '?'}): {why}"
    if verdict != "ok":
        return warn(summary, "set UCX_TLS to put cuda_ipc first and give the workers the GPUs of both "
                             "sides (pd.share_gpus: true); see compose/pd.yaml", **details)
    if has_gpu and result.mem != "VRAM":
        return warn(summary + "; the GPU path (VRAM) was not tested: no worker image here",
                    "build or pull the image, then run the doctor again", **details)
    if not has_gpu:
        summary += "; no GPU here, so the VRAM (KV cache) path is untested"
    return ok(summary, **details)
