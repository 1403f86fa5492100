"""The rehearsal: the real topologies with worker simulators, the real router, in real containers.

What `bundle launch tp4|pd --rehearsal` needs, in one place:
  - the rehearsal image (docker/rehearsal.Dockerfile), tagged by a hash of everything it is built
    from, so `ensure_image()` builds only when an input changed;
  - the compose files: compose/<topology>.yaml plus compose/rehearsal-<topology>.yaml;
  - the env values the overlay adds to the rendered env file (REHEARSAL_IMAGE, the simulated model
    folder as MODEL_HOST_PATH, short health intervals, simulator knobs);
  - what bench_serving needs offline (a local ShareGPT-format dataset file, the tokenizer);
  - what a benchmark against the simulator should measure, for the checks.

    python -m bundle.images.rehearsal image      # build if missing, print the tag (make rehearsal-image)
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from bundle.stack import docker
from bundle.errors import EXIT_ENVIRONMENT, BundleError
from bundle.paths import compose_dir, docker_dir, project_root

IMAGE_REPOSITORY = "sglang-bundle/rehearsal"
BASE_IMAGE = "sglang-bundle/debian-root:bookworm"
TOPOLOGIES = ("tp4", "pd")
# Where the overlay mounts the simulated model (compose's /model), and the offline bench dataset in it.
MODEL_MOUNT = "/model"
BENCH_DATASET = f"{MODEL_MOUNT}/bench-sharegpt.json"


def simulated_model_dir() -> Path:
    """The simulated model folder (config.json, word-level tokenizer): MODEL_HOST_PATH in a rehearsal."""
    return project_root() / "bundle" / "simulator" / "simulated_model"


def dockerfile() -> Path:
    return docker_dir() / "rehearsal.Dockerfile"


def image_inputs() -> list[Path]:
    """Every file the image is built from (the Dockerfile's COPY sources and the Dockerfile)."""
    root = project_root()
    files = [dockerfile(), docker_dir() / "rehearsal.Dockerfile.dockerignore", docker_dir() / "entrypoint.sh",
             root / "bundle" / "__init__.py"]
    files += sorted((root / "requirements").glob("rehearsal*.txt"))
    files += sorted(p for p in (root / "bundle" / "simulator").rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts)
    return files


def image_tag() -> str:
    """sglang-bundle/rehearsal:<hash of the inputs>: a changed input gives a new tag."""
    root = project_root()
    digest = hashlib.sha256()
    for path in image_inputs():
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(BASE_IMAGE.encode())
    return f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:12]}"


def ensure_image(*, rebuild: bool = False) -> str:
    """Build the rehearsal image unless one with the current inputs' tag exists; return its tag."""
    tag = image_tag()
    if not rebuild and docker.image_exists(tag):
        return tag
    if not docker.image_exists(BASE_IMAGE):
        make_base_image()
    args = {"context": project_root(), "dockerfile": dockerfile(), "tags": [tag, f"{IMAGE_REPOSITORY}:latest"],
                "build_args": {"BASE_IMAGE": BASE_IMAGE, "VERSION": tag.split(":")[1]},
                "labels": {"io.sglang-bundle.rehearsal-inputs": tag.split(":")[1]}}
    # The Dockerfile uses BuildKit cache mounts: buildx where installed, else the engine's BuildKit.
    if docker.buildx_available():
        docker.build_image(**args, use_buildx=True)
    else:
        docker.build_image_engine_buildkit(**args)
    return tag


def make_base_image() -> None:
    """Make the Debian root the image is built on (debootstrap, about a minute): no registry needed."""
    import subprocess

    script = docker_dir() / "debian-root.sh"
    print(f"rehearsal: making the base image {BASE_IMAGE} with {script.name} (debootstrap) ...", flush=True)
    result = subprocess.run([str(script), BASE_IMAGE], capture_output=True, text=True)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise BundleError(f"the rehearsal's base image {BASE_IMAGE} could not be made: {' / '.join(detail)}",
                          exit_code=EXIT_ENVIRONMENT,
                          hint="run `sudo docker/debian-root.sh` once (needs root and `apt-get install "
                               "debootstrap`)")


def compose_files(topology: str) -> list[Path]:
    """The real topology's file, then its rehearsal overlay (order matters: the overlay wins)."""
    if topology not in TOPOLOGIES:
        raise BundleError(f"unknown topology {topology!r}; the rehearsal knows {', '.join(TOPOLOGIES)}")
    return [compose_dir() / f"{topology}.yaml", compose_dir() / f"rehearsal-{topology}.yaml"]


# Short health intervals: the simulator "loads" in seconds, not the minutes of a real start.
# Every name here is a variable compose/<topology>.yaml already reads.
FAST_HEALTH = {
    "HEALTH_INTERVAL": "2s",
    "HEALTH_TIMEOUT": "25s",
    "HEALTH_RETRIES": "3",
    "HEALTH_START_PERIOD": "2m",
    "ROUTER_HEALTHCHECK_INTERVAL": "2s",
    "ROUTER_HEALTH_START_PERIOD": "2m",
    "ROUTER_HEALTH_CHECK_INTERVAL_SECS": "2",
    "ROUTER_WORKER_STARTUP_TIMEOUT_SECS": "120",
    "STOP_GRACE_PERIOD": "10s",
    "ROUTER_STOP_GRACE_PERIOD": "10s",
    "ROUTER_SHUTDOWN_GRACE_SECS": "5",
}

# The simulator's knobs and their rehearsal defaults (bundle/simulator/knobs.py documents them).
DEFAULT_KNOBS = {
    "SIM_LOAD_SECONDS": "3",
    "SIM_TTFT_MS": "50",
    "SIM_TPOT_MS": "10",
}


def engine_grantable_limits() -> dict[str, str]:
    """The workers' memlock/nofile limits capped at this host's hard limits.

    A GPU host's engine raises them to what NIXL/UCX need (compose's defaults); an unprivileged
    engine (a CI sandbox) cannot raise a hard limit and refuses to start the container. The
    simulator pins no memory, so the rehearsal keeps the keys at what the host can grant.
    """
    import resource

    values = {}
    for name, limit, default in (("WORKER_MEMLOCK_LIMIT", resource.RLIMIT_MEMLOCK, -1),
                                 ("WORKER_NOFILE_LIMIT", resource.RLIMIT_NOFILE, 1048576)):
        hard = resource.getrlimit(limit)[1]
        if hard != resource.RLIM_INFINITY and (default == -1 or hard < default):
            values[name] = str(hard)
    return values


def env_values(image: str, *, knobs: dict[str, str] | None = None, fast_health: bool = True) -> dict[str, str]:
    """What a rehearsal adds to (or overrides in) the rendered env file of the real topology."""
    values = {"REHEARSAL_IMAGE": image, "MODEL_HOST_PATH": str(simulated_model_dir())}
    values.update(engine_grantable_limits())
    if fast_health:
        values.update(FAST_HEALTH)
    values.update(DEFAULT_KNOBS)
    values.update(knobs or {})
    return values


def bench_dataset_args() -> list[str]:
    """bench_serving's `--dataset-name random` reads ShareGPT, downloaded from the Hugging Face hub
    unless given a local file; the rehearsal (offline) points it at the simulated model's copy."""
    return ["--dataset-path", BENCH_DATASET]


def expected_bench(*, ttft_ms: float, tpot_ms: float, output_lens: list[int], concurrency: int) -> dict:
    """What bench_serving should measure against simulators paced at ttft_ms / tpot_ms, for the
    output lengths it drew: each request takes ttft + (n - 1) * tpot, `concurrency` at a time."""
    lens = [n for n in output_lens if n > 0]
    if not lens:
        raise ValueError("no output lengths")
    per_request = [ttft_ms / 1000 + (n - 1) * tpot_ms / 1000 for n in lens]
    # Requests run in `concurrency` lanes; the wall time is about the total work over the lanes.
    duration = max(sum(per_request) / concurrency, max(per_request))
    return {"mean_tpot_ms": tpot_ms, "mean_ttft_ms": ttft_ms,
            "output_throughput": sum(lens) / duration, "duration_s": duration}


def main(argv: list[str]) -> int:
    if argv[:1] == ["image"]:
        print(ensure_image(rebuild="--rebuild" in argv))
        return 0
    if argv[:1] == ["tag"]:
        print(image_tag())
        return 0
    print("usage: python -m bundle.images.rehearsal image [--rebuild] | tag", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BundleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
