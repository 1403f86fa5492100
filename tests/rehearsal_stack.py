"""A rehearsal stack for Docker tests: a hand-written env file (the variables compose/*.yaml read),
the real topology file plus its rehearsal overlay, a unique project name, and a teardown that always
runs `down -v --remove-orphans`."""

from __future__ import annotations

import json
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import requests

from bundle import topology as registry
from bundle.rehearsal.shared import env as rehearsal
from bundle.stack.docker import Stack
from bundle.rehearsal import registry as modes
from tests.sim_process import free_port

SERVED = "dsv4-simulated"


def env_for(topology: str, project: str, image: str, front_port: int, **overrides) -> dict[str, str]:
    env = {
        "COMPOSE_PROJECT_NAME": project,
        "BUNDLE_TOPOLOGY": topology,
        "BUNDLE_IMAGE": image,  # the real worker image is never pulled: the overlay replaces it
        "BUNDLE_LOCK_HASH": "rehearsal-test",
        "JIT_CACHE_VOLUME": f"{project}-jit",
        "SERVED_MODEL_NAME": SERVED,
        "HOST_ADDRESS": "127.0.0.1",
        "FRONT_PORT": str(front_port),
        "TP4_TP_SIZE": "4",
        "PD_PREFILL_TP_SIZE": "4", "PD_PREFILL_BASE_GPU_ID": "0",
        "PD_DECODE_TP_SIZE": "4", "PD_DECODE_BASE_GPU_ID": "4",
        "PD_BOOTSTRAP_PORT": "8998",
        "DP_REPLICA0_TP_SIZE": "4", "DP_REPLICA1_TP_SIZE": "4",
        "DP_WORKER_URLS": "http://replica-0:30000 http://replica-1:30000",
        "TP4_EXTRA_ARGS": "--enable-metrics",
        "PD_PREFILL_EXTRA_ARGS": "--enable-metrics",
        "PD_DECODE_EXTRA_ARGS": "--enable-metrics",
        "ROUTER_REQUEST_TIMEOUT_SECS": "60",
    }
    env.update(rehearsal.env_values(image))
    env.update(overrides)
    return env


@contextmanager
def rehearsal_stack(tmp_path: Path, topology: str, image: str, **overrides):
    project = f"rehearsal-test-{topology}-{uuid.uuid4().hex[:8]}"
    front = free_port()
    env = env_for(topology, project, image, front, **overrides)
    env_file = tmp_path / f"{project}.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    stack = Stack(project, registry.get(topology).compose_files(
        overlay=modes.get("sim").overlay_file(registry.get(topology))), env_file, profiles=[])
    try:
        yield stack, f"http://127.0.0.1:{front}", env
    finally:
        try:
            logs = stack.logs(tail=200)
            (tmp_path / f"{project}.logs.txt").write_text(logs if isinstance(logs, str) else "")
        finally:
            stack.down(volumes=True, timeout=10)


def wait_healthy(stack: Stack, services: set[str], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    states = []
    while time.monotonic() < deadline:
        states = stack.states()
        healthy = {s.service for s in states if s.health == "healthy"}
        if services <= healthy:
            return
        time.sleep(1)
    raise AssertionError(f"not healthy within {timeout}s: {[(s.service, s.state, s.health) for s in states]}")


def chat(front: str, *, key: str | None = None, timeout: float = 30.0) -> requests.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return requests.post(front + "/v1/chat/completions", headers=headers, timeout=timeout, json={
        "model": SERVED, "temperature": 0,
        "messages": [{"role": "user", "content": "What is the capital of France?"}]})


def bench(stack: Stack, out_dir: Path, host: str, *, concurrency: int, prompts: int, output_len: int,
          key: str | None = None) -> dict:
    """SGLang's bench_serving inside the rehearsal image (the `bench` tool service), offline."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out_dir.chmod(0o777)
    cmd = ["python3", "-m", "sglang.bench_serving", "--backend", "sglang", "--host", host, "--port", "30000",
           "--model", "/model", "--tokenizer", "/model", "--dataset-name", "random",
           *rehearsal.bench_dataset_args(), "--random-input-len", "256",
           "--random-output-len", str(output_len), "--random-range-ratio", "1.0",
           "--num-prompts", str(prompts), "--max-concurrency", str(concurrency),
           "--output-file", "/out/bench.jsonl"]
    if host == "router":
        # smg in IGW mode (pd's front door: an unserved model is a 404) asks /generate to name the model, as
        # `bundle bench` does (bundle/verify/bench_serving.py).
        cmd += ["--extra-request-body", json.dumps({"model": SERVED})]
    env = {"OPENAI_API_KEY": key} if key else {}
    stack.run("bench", cmd, env=env, volumes=[(str(out_dir), "/out")])
    lines = (out_dir / "bench.jsonl").read_text().strip().splitlines()
    return json.loads(lines[-1])


# A simulator paces its tokens on absolute deadlines from the request's arrival: a loaded host can
# deliver a token late, never before its deadline. So no request completes sooner than
# ttft + (n - 1) * tpot. bench_serving's TPOT is not bounded that way: a token read late (the server
# or the client starved of CPU) lets the next ones arrive at once, so the TPOT between the first and
# the last token falls below the pace. Seen in a cold CI run on this 2-core machine (2026-12-05):
# TPOT 8.57 ms against a 10 ms pace (two of four requests read their second and third tokens within
# 0.5 ms of the first), while the requests' mean time (171.8 ms) stayed above their pace (160 ms). Hence the
# bounds are one-sided where the load pushes: each request's time at least PACE_FLOOR of its pace
# (timer granularity), throughput at most PACE_CEILING of the paced figure (what a working knob must
# give); and within LOAD_SLACK the other way (a knob that never arrived misses by an order of
# magnitude, not 3x).
PACE_FLOOR = 0.95
PACE_CEILING = 1.05
LOAD_SLACK = 3.0


def request_ms(metrics: dict, output_len: int) -> float:
    """A request's mean time, first byte sent to last token read, from bench_serving's means, for
    requests that all produced output_len tokens: its TPOT is (e2e - ttft) / (n - 1) per request."""
    return metrics["mean_ttft_ms"] + (output_len - 1) * metrics["mean_tpot_ms"]


def assert_paced(measured: dict, want: dict, output_len: int, what: str = "") -> None:
    """bench_serving's means against rehearsal.expected_bench's, for requests of output_len tokens."""
    took, paced = request_ms(measured, output_len), request_ms(want, output_len)
    assert PACE_FLOOR * paced <= took, (what, took, paced, measured["mean_tpot_ms"])
    tpot, throughput = measured["mean_tpot_ms"], measured["output_throughput"]
    assert tpot <= LOAD_SLACK * want["mean_tpot_ms"], (what, tpot, want)
    assert (want["output_throughput"] / LOAD_SLACK <= throughput <= PACE_CEILING * want["output_throughput"]), (
        what, throughput, want)
