"""Host limits: /dev/shm, memlock, and free disk for the image, the model and the JIT caches."""

from __future__ import annotations

import os
import resource
import shutil
from pathlib import Path

from bundle.doctor.context import HostContext
from bundle.doctor.core import CheckResult, fail, ok, warn
from bundle.errors import EnvironmentProblem

GIB = 1024 ** 3
# pd runs with `ipc: host`, so SGLang's and NCCL's shared-memory segments live in the host's /dev/shm;
# SGLang's own Docker instructions give containers 32 GiB.
MIN_SHM = 32 * GIB
# Estimates (no image or checkpoint of this stack has been measured here): the runtime image on a CUDA
# 13 devel base with torch, SGLang, flashinfer and NIXL, unpacked; the checkpoint (284B parameters,
# MXFP4 experts, FP8 attention) on disk; the JIT cache volumes after a few starts.
IMAGE_BYTES = 45 * GIB
MODEL_BYTES = 170 * GIB
CACHE_BYTES = 20 * GIB


def _human(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def shared_memory(ctx: HostContext) -> CheckResult:
    try:
        st = os.statvfs("/dev/shm")
    except OSError as exc:
        return fail(f"/dev/shm is not mounted: {exc}", "mount a tmpfs on /dev/shm (size=64G)")
    size = st.f_frsize * st.f_blocks
    free = st.f_frsize * st.f_bavail
    details = {"size_bytes": size, "free_bytes": free, "minimum_bytes": MIN_SHM}
    if size < MIN_SHM:
        return warn(f"/dev/shm is {_human(size)} ({_human(free)} free); the workers share it (ipc: host) "
                    f"and want at least {_human(MIN_SHM)}",
                    "sudo mount -o remount,size=64G /dev/shm (and in /etc/fstab to keep it)", **details)
    return ok(f"/dev/shm {_human(size)} ({_human(free)} free)", **details)


def memlock(ctx: HostContext) -> CheckResult:
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    unlimited = resource.RLIM_INFINITY
    text = lambda v: "unlimited" if v == unlimited else _human(v) if v >= GIB else f"{v // 1024} KiB"
    details = {"soft": None if soft == unlimited else soft, "hard": None if hard == unlimited else hard}
    # The containers get memlock=-1 from compose (Docker raises it as root), so this limit binds only
    # NIXL/UCX run from this shell; the in-image NIXL check reports the container's own limit.
    if soft == unlimited:
        return ok("memlock unlimited for this shell; compose gives the workers memlock=-1", **details)
    return warn(f"memlock {text(soft)} (hard {text(hard)}) for this shell: host-side NIXL/UCX cannot pin "
                "large buffers; the containers get memlock=-1 from compose",
                "for host-side runs: `ulimit -l unlimited` (or memlock in /etc/security/limits.conf)",
                **details)


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def disk_space(ctx: HostContext) -> CheckResult:
    from bundle.stack import engine

    root = "/var/lib/docker"
    image_present = False
    try:
        root = ctx.engine.root_dir or root
        image_present = bool(ctx.image) and engine.image_facts(ctx.image) is not None
    except EnvironmentProblem:
        pass  # no engine: the docker check says so; estimate for the default root
    needs: list[tuple[str, Path, int]] = [
        ("JIT caches (docker volumes)", Path(root), CACHE_BYTES),
    ]
    if not image_present:
        needs.append(("worker image", Path(root), IMAGE_BYTES))
    model = Path(ctx.model_path) if ctx.model_path else None
    if model is not None and not model.exists():
        needs.append(("model checkpoint", model, MODEL_BYTES))

    by_device: dict[int, dict] = {}
    for what, path, need in needs:
        where = _existing_ancestor(path)
        usage = shutil.disk_usage(where)
        entry = by_device.setdefault(where.stat().st_dev, {"mount": str(where), "free": usage.free,
                                                          "need": 0, "for": []})
        entry["need"] += need
        entry["for"].append(f"{what} ~{_human(need)}")
    short = [e for e in by_device.values() if e["free"] < e["need"]]
    details = {"filesystems": list(by_device.values()), "image_present": image_present,
               "estimates": "sizes are estimates, not measurements"}
    lines = "; ".join(f"{e['mount']}: {_human(e['free'])} free, needs ~{_human(e['need'])}"
                      for e in by_device.values())
    if short:
        worst = short[0]
        return fail(f"not enough disk: {lines}",
                    f"free space on {worst['mount']} ({', '.join(worst['for'])}) or move Docker's "
                    "data-root / the model to a larger disk", **details)
    return ok(lines, **details)
