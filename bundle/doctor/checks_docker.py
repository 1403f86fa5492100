"""Docker checks: engine and compose versions, and a GPU runtime Docker can use."""

from __future__ import annotations

import glob
import re
import shutil

from bundle.doctor.context import HostContext
from bundle.doctor.core import CheckResult, fail, ok, skip, warn
from bundle.errors import EnvironmentProblem

# compose/*.yaml use `env_file: [{path, required}]` (compose 2.24+) and GPU device reservations.
MIN_COMPOSE = (2, 24, 0)
MIN_ENGINE = (20, 10, 0)
CDI_ENGINE = (25, 0, 0)  # the first Docker Engine that reads CDI specs
CDI_SPEC_GLOBS = ("/etc/cdi/*.yaml", "/etc/cdi/*.json", "/var/run/cdi/*.yaml", "/var/run/cdi/*.json")


def version_tuple(text: str) -> tuple[int, ...] | None:
    """(20, 10, 24) from '20.10.24+dfsg1', (2, 40, 3) from 'v2.40.3'; None if no version is in it."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if not match:
        return None
    return tuple(int(p) for p in match.groups(default="0"))


def _text(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


def docker_versions(ctx: HostContext) -> CheckResult:
    from bundle.stack import engine

    try:
        info = ctx.engine
    except EnvironmentProblem as exc:
        return fail(exc.message, exc.hint or "install and start Docker Engine")
    compose = engine.engine_versions()["compose"]
    details = {"engine": info.server_version, "compose": compose or None}
    engine_v = version_tuple(info.server_version)
    compose_v = version_tuple(compose)
    if engine_v is None or engine_v < MIN_ENGINE:
        return fail(f"Docker Engine {info.server_version or 'unknown'} is older than {_text(MIN_ENGINE)}",
                    "upgrade Docker Engine (https://docs.docker.com/engine/install/)", **details)
    if compose_v is None:
        return fail("the Docker Compose v2 plugin (`docker compose`) is not installed",
                    "install docker-compose-plugin, or `make install` (adds it to ~/.docker/cli-plugins)",
                    **details)
    if compose_v < MIN_COMPOSE:
        return fail(f"Docker Compose {compose} is older than {_text(MIN_COMPOSE)} (compose/*.yaml need it)",
                    "upgrade docker-compose-plugin", **details)
    return ok(f"Docker Engine {info.server_version}, Compose {compose}", **details)


def cdi_nvidia_specs() -> list[str]:
    found = []
    for pattern in CDI_SPEC_GLOBS:
        for path in glob.glob(pattern):
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    if "nvidia.com/gpu" in handle.read():
                        found.append(path)
            except OSError:
                continue
    return sorted(found)


def nvidia_runtime(ctx: HostContext) -> CheckResult:
    try:
        engine = ctx.engine
    except EnvironmentProblem as exc:
        return fail(exc.message, exc.hint or "install and start Docker Engine")
    specs = cdi_nvidia_specs()
    toolkit = shutil.which("nvidia-container-cli") or shutil.which("nvidia-ctk")
    details = {"runtimes": list(engine.runtimes), "default_runtime": engine.default_runtime,
               "cdi_specs": specs, "toolkit": toolkit}
    if "nvidia" in engine.runtimes:
        return ok(f"Docker knows the nvidia runtime (default: {engine.default_runtime})", **details)
    if specs:
        engine_v = version_tuple(engine.server_version) or (0,)
        if engine_v >= CDI_ENGINE:
            return ok(f"NVIDIA CDI spec {specs[0]}; Docker {engine.server_version} reads CDI", **details)
        return warn(f"an NVIDIA CDI spec exists but Docker {engine.server_version} predates CDI (25.0)",
                    "upgrade Docker Engine to 25+, or `nvidia-ctk runtime configure --runtime=docker`",
                    **details)
    if toolkit and ctx.gpu_problem() is None:
        # The toolkit's hook serves `--gpus` without a registered runtime on many installs.
        return warn("no nvidia runtime registered and no CDI spec, but the NVIDIA Container Toolkit "
                    "is installed", "`sudo nvidia-ctk runtime configure --runtime=docker && "
                    "sudo systemctl restart docker`", **details)
    gpu_problem = ctx.gpu_problem()
    if gpu_problem:
        return skip(f"no GPU here, and Docker has no NVIDIA runtime (runtimes: "
                    f"{', '.join(engine.runtimes) or 'none'})",
                    "on the GPU host: install the NVIDIA Container Toolkit", **details)
    return fail(f"GPUs are present but Docker has no NVIDIA runtime (runtimes: {', '.join(engine.runtimes)})",
                "install the NVIDIA Container Toolkit, then `sudo nvidia-ctk runtime configure "
                "--runtime=docker && sudo systemctl restart docker`", **details)
