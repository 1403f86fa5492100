"""What a rehearsal adds to the rendered env of the real topology: the rehearsal image, the
simulated model folder as MODEL_HOST_PATH, short health intervals, host-grantable limits and the
simulator's knobs; and what bench_serving against simulated workers needs and should measure."""

from __future__ import annotations

from pathlib import Path

from bundle.paths import project_root

# Where the overlay mounts the simulated model (compose's /model), and the offline bench dataset in it.
MODEL_MOUNT = "/model"
BENCH_DATASET = f"{MODEL_MOUNT}/bench-sharegpt.json"


def simulated_model_dir() -> Path:
    """The simulated model folder (config.json, word-level tokenizer): MODEL_HOST_PATH in a rehearsal."""
    return project_root() / "bundle" / "rehearsal" / "simulator" / "simulated_model"


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
    # How long smg keeps trying to register a worker: simulators on a loaded 2-core box took over
    # 2 minutes to answer in a Slurm rehearsal, and smg gave up at 120 s (the job then never got
    # ready). The wait's own failure detection does not depend on it, so the margin costs nothing.
    "ROUTER_WORKER_STARTUP_TIMEOUT_SECS": "600",
    "STOP_GRACE_PERIOD": "10s",
    # smg holds its listener 5 s after SIGTERM before it drains (no flag): margin over both.
    "ROUTER_STOP_GRACE_PERIOD": "20s",
    "ROUTER_SHUTDOWN_GRACE_SECS": "5",
}

# The simulator's knobs and their rehearsal defaults (bundle/rehearsal/simulator/knobs.py documents them).
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
