"""The worker simulator on its own: its command line, its model, and its HTTP behaviour as a local
process on 127.0.0.1 (what the router, bench_serving and the driver rely on)."""

from __future__ import annotations

import json
import time

import pytest
import requests

from bundle.rehearsal.simulator.answers import plan_output
from bundle.rehearsal.simulator.args import parse_launch_args, strip_launch_prefix
from bundle.rehearsal.simulator.knobs import Knobs
from bundle.rehearsal.simulator.model import SimulatedModel
from tests.sim_process import MODEL, launch_command, simulator

CAPITAL = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]


def _sse(resp) -> list:
    out = []
    for line in resp.iter_lines():
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


# ---- command line ---------------------------------------------------------------------------

def test_the_compose_command_line_is_taken_as_is():
    argv = launch_command(30000, "--disaggregation-mode", "decode", "--disaggregation-bootstrap-port", "8998")
    assert strip_launch_prefix(argv)[:2] == ["--model-path", str(MODEL)]
    assert strip_launch_prefix(["--", *argv]) == strip_launch_prefix(argv)


def test_sglangs_own_parser_reads_every_field():
    launch = parse_launch_args(launch_command(30000, "--disaggregation-mode", "prefill",
                                              "--api-key", "k-123"))
    assert launch.parser == "sglang"
    assert launch.fields["tp_size"] == 4
    assert launch.disaggregation_mode == "prefill"
    assert launch.fields["api_key"] == "k-123"
    assert len(launch.fields) > 300  # every ServerArgs field, for /server_info


def test_a_misspelled_flag_fails_like_the_real_server():
    with pytest.raises(SystemExit) as exc:
        parse_launch_args(launch_command(30000, "--tp-szie", "4"))
    assert exc.value.code == 2


def test_the_fallback_parser_keeps_what_it_does_not_know():
    launch = parse_launch_args(launch_command(30000, "--some-new-flag", "x"), use_sglang=False)
    assert launch.parser == "fallback"
    assert launch.fields["port"] == 30000 and launch.get("tp_size") == 4
    assert launch.ignored == ["--some-new-flag", "x"]


# ---- model and answers ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def model():
    return SimulatedModel(str(MODEL))


def _plan(model, prompt, **kw):
    base = {"prompt_text": prompt, "prompt_ids": model.encode(prompt), "max_new_tokens": 64,
            "ignore_eos": False, "temperature": 0.0, "seed": None, "wrong": False, "knob_seed": 0,
            "encode": model.encode, "filler_ids": model.filler_ids}
    base.update(kw)
    return plan_output(**base)


def test_output_text_tokenizes_back_to_the_same_count(model):
    plan = _plan(model, "tell me a story", max_new_tokens=300, ignore_eos=True)
    text = model.decode(plan.ids)
    assert len(plan.ids) == 300
    assert model.encode(text) == plan.ids


def test_known_questions_get_their_answer_or_a_wrong_one(model):
    assert "Paris" in model.decode(_plan(model, "What is the capital of France?").ids)
    wrong = model.decode(_plan(model, "What is the capital of France?", wrong=True).ids)
    assert "Paris" not in wrong and "France" in wrong


def test_greedy_is_deterministic_and_sampling_is_not(model):
    assert _plan(model, "zig zag").ids == _plan(model, "zig zag").ids
    sampled = {tuple(_plan(model, "zig zag", temperature=1.0, max_new_tokens=20, ignore_eos=True).ids)
               for _ in range(5)}
    assert len(sampled) > 1
    seeded = {tuple(_plan(model, "zig zag", temperature=1.0, seed=7, max_new_tokens=20,
                          ignore_eos=True).ids) for _ in range(3)}
    assert len(seeded) == 1


def test_knobs_come_from_env_and_reject_bad_updates(monkeypatch):
    monkeypatch.setenv("SIM_TPOT_MS", "25")
    monkeypatch.setenv("SIM_HANG", "1")
    knobs = Knobs.from_env()
    assert knobs.tpot_ms == 25.0 and knobs.hang is True
    knobs.update({"hang": False, "failure_rate": 0.5})
    assert knobs.hang is False and knobs.failure_rate == 0.5
    for bad in ({"nope": 1}, {"hang": "yes"}, {"tpot_ms": -1}):
        with pytest.raises(ValueError):
            knobs.update(bad)


# ---- HTTP, one process for the read-only checks ---------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sim")
    with simulator(tmp, "--enable-metrics", env={"SIM_TTFT_MS": "30", "SIM_TPOT_MS": "5"},
                   sglang_parser=True) as (base, _, _):
        yield base


def chat(base, messages=CAPITAL, **kw):
    body = {"model": "dsv4", "messages": messages, "temperature": 0, "max_tokens": 64, **kw}
    return requests.post(base + "/v1/chat/completions", json=body, timeout=30)


def test_chat_answers_paris_with_usage(server):
    r = chat(server)
    assert r.status_code == 200
    body = r.json()
    assert "Paris" in body["choices"][0]["message"]["content"]
    assert body["choices"][0]["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["completion_tokens"] > 0 and usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_streamed_chat_gives_the_same_text_and_usage(server):
    plain = chat(server).json()
    with chat(server, stream=True, stream_options={"include_usage": True}, ) as r:
        r.raise_for_status()
        chunks = _sse(r)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == plain["choices"][0]["message"]["content"]
    assert chunks[-1]["usage"]["completion_tokens"] == plain["usage"]["completion_tokens"]


def test_greedy_output_is_identical_across_runs(server):
    a = chat(server, messages=[{"role": "user", "content": "write something"}]).json()
    b = chat(server, messages=[{"role": "user", "content": "write something"}]).json()
    assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]


def test_completions_plain_and_streamed(server):
    body = {"model": "dsv4", "prompt": "The capital of France is", "max_tokens": 12, "temperature": 0}
    plain = requests.post(server + "/v1/completions", json=body, timeout=30).json()
    assert plain["object"] == "text_completion" and plain["usage"]["completion_tokens"] <= 12
    with requests.post(server + "/v1/completions", json={**body, "stream": True}, stream=True, timeout=30) as r:
        text = "".join(c["choices"][0]["text"] for c in _sse(r))
    assert text == plain["choices"][0]["text"]


def test_generate_streams_cumulative_text_as_bench_serving_reads_it(server):
    body = {"text": "hello there", "sampling_params": {"max_new_tokens": 40, "ignore_eos": True,
                                                      "temperature": 0}, "stream": True}
    with requests.post(server + "/generate", json=body, stream=True, timeout=30) as r:
        chunks = _sse(r)
    assert len(chunks) == 40
    assert [c["meta_info"]["completion_tokens"] for c in chunks] == list(range(1, 41))
    assert all(chunks[i + 1]["text"].startswith(chunks[i]["text"]) for i in range(39))
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 40}
    plain = requests.post(server + "/generate", json={**body, "stream": False}, timeout=30).json()
    assert plain["text"] == chunks[-1]["text"]


def test_info_endpoints_echo_the_launch(server):
    info = requests.get(server + "/get_server_info", timeout=10).json()
    assert info["tp_size"] == 4 and info["disaggregation_mode"] == "null"
    # Resolved as SGLang 0.5.23 resolves `auto` for DeepSeek-V4 on sm_120 (bundle/rehearsal/simulator/resolve.py).
    assert info["kv_cache_dtype"] == "fp8_e4m3" and info["moe_runner_backend"] == "flashinfer_mxfp4"
    assert info["worker_simulator"]["resolved"]["moe_runner_backend"] == ["auto", "flashinfer_mxfp4"]
    assert "disable_cuda_graph" in info and "attention_backend" in info
    assert info["worker_simulator"]["knobs"]["tpot_ms"] == 5.0
    assert requests.get(server + "/server_info", timeout=10).json()["tp_size"] == 4
    model = requests.get(server + "/model_info", timeout=10).json()
    assert model["served_model_name"] == "dsv4" and model["is_generation"] is True
    models = requests.get(server + "/v1/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == ["dsv4"]


def test_loads_report_the_running_requests_as_sglang_does_and_loads_is_not_served(server):
    # smg polls /loads, then SGLang 0.5.23's /v1/loads, for its load-aware routing.
    assert requests.get(server + "/loads", timeout=10).status_code == 404
    # 12000 tokens at 5 ms: a minute running, unless the closed stream ends it (so only that can pass
    # the poll below, even on a loaded box: with 400 tokens, 2 s, a build beside the fast tier once
    # slowed the generation past the poll's 5 s on 2026-12-04, and a working abort could not be told
    # from the end of the generation).
    body = {"text": "x", "sampling_params": {"max_new_tokens": 12000, "ignore_eos": True}, "stream": True}
    with requests.post(server + "/generate", json=body, stream=True, timeout=30) as r:
        lines = r.iter_lines()  # held: a dropped iterator closes the stream, which ends the request
        next(line for line in lines if line.startswith(b"data: {"))
        during = requests.get(server + "/v1/loads", timeout=10).json()
    # The server learns of the closed stream at its next write (every 5 ms here): poll, well inside
    # the minute the generation would take.
    deadline = time.monotonic() + 20
    while True:
        after = requests.get(server + "/v1/loads", timeout=10).json()
        if after["loads"][0]["num_running_reqs"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert during["version"] == "0.5.23" and len(during["loads"]) == 1
    assert during["loads"][0]["dp_rank"] == 0 and during["loads"][0]["num_running_reqs"] == 1
    assert after["loads"][0]["num_running_reqs"] == 0 and after["loads"][0]["num_waiting_reqs"] == 0


def test_metrics_count_requests_but_not_health_checks(server):
    def done():
        text = requests.get(server + "/metrics", timeout=10).text
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("sglang:num_requests_total"))
    before = done()
    requests.get(server + "/health", timeout=10)
    chat(server)
    assert done() == before + 1


# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_stream_is_paced_at_the_configured_tpot(tmp_path):
    with simulator(tmp_path, env={"SIM_TTFT_MS": "200", "SIM_TPOT_MS": "20"}) as (base, _, _):
        body = {"text": "x", "sampling_params": {"max_new_tokens": 51, "ignore_eos": True}, "stream": True}
        stamps = []
        start = time.monotonic()
        with requests.post(base + "/generate", json=body, stream=True, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith(b"data: {"):
                    stamps.append(time.monotonic())
    ttft = stamps[0] - start
    tpot = (stamps[-1] - stamps[0]) / 50
    assert 0.18 < ttft < 0.3
    assert 0.018 < tpot < 0.023


# ---- HTTP, states and faults (each its own process) -----------------------------------------

# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_health_is_503_while_loading_but_models_answer(tmp_path):
    # Loading until told otherwise: a 10 s load was eaten whole by a 22 s process start at load 12
    # on this 2-core box (2026-12-03), so the load ends by the knob, not by the clock.
    with simulator(tmp_path, env={"SIM_LOAD_SECONDS": "600"}, wait_healthy=False) as (base, _proc, _):
        assert requests.get(base + "/health", timeout=5).status_code == 503
        assert requests.get(base + "/v1/models", timeout=5).status_code == 200
        requests.post(base + "/sim/faults", json={"load_seconds": 0}, timeout=5).raise_for_status()
        deadline = time.monotonic() + 30
        while requests.get(base + "/health", timeout=5).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)


# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_an_api_key_guards_everything_but_health(tmp_path):
    with simulator(tmp_path, "--api-key", "sekrit") as (base, _, _):
        assert requests.get(base + "/health", timeout=5).status_code == 200
        assert chat(base).status_code == 401
        assert requests.get(base + "/v1/models", timeout=5).status_code == 401
        ok = requests.post(base + "/v1/chat/completions", timeout=30,
                           headers={"Authorization": "Bearer sekrit"},
                           json={"model": "dsv4", "messages": CAPITAL, "temperature": 0})
        assert ok.status_code == 200 and "Paris" in ok.json()["choices"][0]["message"]["content"]


# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_wrong_answers_on_request(tmp_path):
    with simulator(tmp_path, env={"SIM_WRONG_ANSWERS": "1"}) as (base, _, _):
        assert "Paris" not in chat(base).json()["choices"][0]["message"]["content"]


# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_a_hang_flipped_at_run_time_stalls_requests_and_health(tmp_path):
    env = {"SGLANG_HEALTH_CHECK_TIMEOUT": "1"}
    with simulator(tmp_path, env=env) as (base, _, _):
        assert requests.post(base + "/sim/faults", json={"hang": True}, timeout=5).json()["hang"] is True
        with pytest.raises(requests.Timeout):
            requests.post(
                base + "/v1/chat/completions", json={"model": "dsv4", "messages": CAPITAL}, timeout=2)
        assert requests.get(base + "/health", timeout=10).status_code == 503
        requests.post(base + "/sim/faults", json={"hang": False}, timeout=5)
        assert chat(base).status_code == 200


# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_failure_rate_one_fails_every_generation(tmp_path):
    with simulator(tmp_path, env={"SIM_FAILURE_RATE": "1"}) as (base, _, _):
        r = chat(base)
        assert r.status_code == 500 and "simulated failure" in r.json()["message"]
        assert requests.get(base + "/health", timeout=5).status_code == 200


# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_crash_after_n_requests_exits_non_zero(tmp_path):
    with simulator(tmp_path, env={"SIM_CRASH_AFTER_REQUESTS": "2"}) as (base, proc, log):
        assert chat(base).status_code == 200
        with pytest.raises(requests.ConnectionError):
            chat(base)
        proc.wait(timeout=10)
        assert proc.returncode == 1
        assert "SIM_CRASH_AFTER_REQUESTS" in log.read_text()


# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_a_pd_worker_refuses_requests_without_bootstrap_fields(tmp_path):
    with simulator(tmp_path, "--disaggregation-mode", "decode", "--disaggregation-transfer-backend",
                   "nixl") as (base, _, _):
        r = chat(base)
        assert r.status_code == 400 and "bootstrap" in r.json()["message"]
