"""The simulator rehearsal on a real Docker engine: the image, the overlays as compose resolves them, tp4 and pd
brought up with worker simulators behind the real router (smg), bench_serving measuring what the
simulators were told, and faults (a hung worker, an API key)."""

from __future__ import annotations

import subprocess
import time

import pytest
import requests

from bundle import topology as registry
from bundle.rehearsal.shared import env as rehearsal
from bundle.stack.docker import Stack
from bundle.targets.registry import stack_of
from bundle.rehearsal import registry as modes
from tests.e2e.conftest import sim_knobs
from tests.rehearsal_stack import SERVED, assert_paced, bench, chat, env_for, rehearsal_stack, wait_healthy

pytestmark = pytest.mark.docker


@pytest.fixture(scope="session")
def image(rehearsal_image) -> str:
    return rehearsal_image  # tests/e2e/conftest.py: built once when its inputs changed


# ---- the overlay, as compose resolves it --------------------------------------------------

def _config(tmp_path, files, topology, image="sglang-bundle/rehearsal:test") -> dict:
    env = env_for(topology, f"cfg-{topology}", image, 30000)
    env_file = tmp_path / f"{topology}.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    return Stack(f"cfg-{topology}", files, env_file).config()["services"]


@pytest.mark.parametrize("topology,workers", [("tp4", ["server"]), ("pd", ["prefill", "decode"]),
                                              ("dp", ["replica-0", "replica-1"])])
def test_the_overlay_changes_only_image_entrypoint_and_gpus(tmp_path, topology, workers):
    files = registry.get(topology).compose_files(
        overlay=modes.get("sim").overlay_file(registry.get(topology)))
    real = _config(tmp_path, files[:1], topology)
    rehearsed = _config(tmp_path, files, topology)
    assert set(rehearsed) == set(real), "the overlay must not add or drop services"
    for name in workers:
        r, s = real[name], rehearsed[name]
        assert s["image"] == "sglang-bundle/rehearsal:test"
        assert s["entrypoint"] == ["bundle-entrypoint", "sglang-worker-simulator"]
        assert "deploy" in r and "deploy" not in s
        for key in ("command", "healthcheck", "restart", "ports", "secrets", "volumes", "networks",
                    "stop_grace_period", "ulimits", "ipc", "labels", "depends_on"):
            assert s.get(key) == r.get(key), f"{name}.{key} differs"
        assert {k: v for k, v in s["environment"].items() if not k.startswith("SIM_")} == r["environment"]
    if registry.get(topology).has_router:
        r, s = real["router"], rehearsed["router"]
        assert s["image"] == "sglang-bundle/rehearsal:test"
        assert {k: v for k, v in s.items() if k != "image"} == {k: v for k, v in r.items() if k != "image"}


# ---- the image ----------------------------------------------------------------------------

def test_the_image_holds_the_real_router_and_bench_serving(image):
    out = subprocess.run(["docker", "run", "--rm", "--entrypoint", "python3", image, "-c",
                          ("import importlib.metadata as m, importlib.util as u; import sglang.benchmark.serving, "
                           "smg.launch_router; print(m.version('sglang'), m.version('smg'), m.version('torch'), "
                           "u.find_spec('sglang_router'))")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0.5.23", "1.13.0", "2.14.1", "None"]


# ---- whole topologies ---------------------------------------------------------------------

TTFT_MS, TPOT_MS, OUT_LEN = 100, 20, 64


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("topology", ["tp4", "pd"])
def test_topology_comes_up_answers_and_benchmarks_as_configured(tmp_path, shared_rehearsal, topology):
    shared = shared_rehearsal(topology)  # the session's launch (tests/e2e/conftest.py); read only here
    stack = stack_of(shared.record)
    services = {"server"} if topology == "tp4" else {"prefill", "decode", "router"}
    wait_healthy(stack, services)
    r = chat(shared.front, key=shared.key)
    assert r.status_code == 200 and "Paris" in r.json()["choices"][0]["message"]["content"]
    host = "server" if topology == "tp4" else "router"
    with sim_knobs(shared, ttft_ms=TTFT_MS, tpot_ms=TPOT_MS):
        result = bench(stack, tmp_path / "bench", host, concurrency=2, prompts=8, output_len=OUT_LEN,
                       key=shared.key)
    print(f"\nbench {topology}: tpot {result['mean_tpot_ms']:.2f} ms (want {TPOT_MS}), ttft "
          f"{result['mean_ttft_ms']:.1f} ms (want {TTFT_MS}), output {result['output_throughput']:.1f} tok/s")
    assert result["completed"] == 8
    assert result["total_output_tokens"] == 8 * OUT_LEN
    assert result["total_output_tokens_retokenized"] == result["total_output_tokens"]
    want = rehearsal.expected_bench(ttft_ms=TTFT_MS, tpot_ms=TPOT_MS, output_lens=[OUT_LEN] * 8,
                                    concurrency=2)
    print(f"  expected output {want['output_throughput']:.1f} tok/s")
    assert_paced(result, want, OUT_LEN, topology)
    if topology == "pd":
        # The request demonstrably passed prefill and decode: both count it.
        for worker in ("prefill", "decode"):
            metrics = stack.exec(worker, ["curl", "-fsS", "http://127.0.0.1:30000/metrics"])
            assert "sglang:num_requests_total" in metrics
            assert f'sglang_simulator:bootstrap_rooms_total{{model_name="{SERVED}",role="{worker}"}}' in metrics


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_hung_decode_worker_fails_requests_within_the_router_timeout(tmp_path, image):
    # One attempt: smg's --retry-max-retries counts attempts (it refuses 0: "must be >= 1"), and
    # --request-timeout-secs bounds each one.
    with rehearsal_stack(tmp_path, "pd", image, ROUTER_REQUEST_TIMEOUT_SECS="8",
                         ROUTER_RETRY_MAX_RETRIES="1") as (stack, front, _env):
        stack.up()
        wait_healthy(stack, {"prefill", "decode", "router"})
        assert chat(front).status_code == 200
        stack.exec("decode", ["curl", "-fsS", "-X", "POST", "-H", "content-type: application/json",
                              "-d", '{"hang": true}', "http://127.0.0.1:30000/sim/faults"])
        start = time.monotonic()
        try:
            status = chat(front, timeout=60).status_code
        except requests.RequestException:
            status = None
        elapsed = time.monotonic() - start
        print(f"\nhung decode: router answered {status} after {elapsed:.1f}s (request timeout 8s)")
        assert status is not None and status >= 500, "the router must answer with an error, not hang"
        assert elapsed < 8 + 10, f"failed only after {elapsed:.1f}s"


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("topology", ["tp4", "pd"])
def test_an_api_key_is_enforced_and_never_shown(shared_rehearsal, topology):
    shared = shared_rehearsal(topology)  # launched with api_key_file (tests/e2e/conftest.py)
    key, stack = shared.key, stack_of(shared.record)
    wait_healthy(stack, {"server"} if topology == "tp4" else {"prefill", "decode", "router"})
    assert chat(shared.front).status_code == 401
    ok = chat(shared.front, key=key)
    assert ok.status_code == 200 and "Paris" in ok.json()["choices"][0]["message"]["content"]
    names = [s.name for s in stack.states()]
    inspect = subprocess.run(["docker", "inspect", *names], capture_output=True, text=True, timeout=60, check=False)
    assert inspect.returncode == 0 and key not in inspect.stdout
    logs = stack.logs()
    assert isinstance(logs, str) and key not in logs
