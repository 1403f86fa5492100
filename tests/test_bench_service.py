"""`bundle bench`'s service (bundle/service/bench.py) called directly, with a recording reporter and a
scripted bench_serving container (tests/test_bench.py's FakeStack): each level reported as it starts,
a level that times out kept in the record and named in bad_levels, the second run compared with the
first, and a gate without a reference refused rather than passed."""

from __future__ import annotations

import pytest

from bundle import topology as registry
from bundle.config.loader import load_config
from bundle.errors import EXIT_FAILED, EXIT_USAGE, BundleError
from bundle.service import bench as service
from bundle.stack import runstate
from bundle.verify import runstore
from tests.recording import RecordingReporter
from bundle.stack.docker import ContainerState
from tests.test_bench import FakeStack


class RunningStack(FakeStack):
    """The scripted container, and the front door still running when asked whether the stack went away."""

    def states(self):
        return [ContainerState(name="server-1", service="server", state="running", health="", exit_code=None,
                               restart_count=0, ports={})]


def _record(tmp_path) -> runstate.LaunchRecord:
    env = {"WORKER_PORT": "30000", "MODEL_HOST_PATH": str(tmp_path), "BUNDLE_LOCK_HASH": "abc123"}
    return runstate.LaunchRecord(project="bench-service", topology="tp4", compose_files=[], env_file="",
                                 mode="sim", config="<embedded defaults>", started_at=0.0,
                                 run_dir=str(tmp_path), env=env)


def _benchmark(tmp_path, monkeypatch, outcomes, request):
    reporter = RecordingReporter()
    benched = service.benchmark(load_config(None), registry.get("tp4"), _record(tmp_path), RunningStack(outcomes),
                                request, reporter)
    return benched, reporter


def test_a_timed_out_level_is_reported_recorded_and_named_and_the_next_run_compares_with_the_first(
        tmp_path, runs_dir, monkeypatch):
    first, reporter = _benchmark(tmp_path, monkeypatch, {1: "ok", 2: "timeout"},
                                 service.BenchRequest(concurrency=(1, 2), label="first"))
    assert [lv.concurrency for lv in first.bad_levels] == [2] and first.bad_levels[0].status == "timeout"
    assert [line.split(":")[0] for line in reporter.lines if line.startswith("level ")] == \
        ["level 1 of 2", "level 2 of 2"]
    assert first.previous is None and first.history == []
    second, _ = _benchmark(tmp_path, monkeypatch, {1: "ok"}, service.BenchRequest(concurrency=(1,)))
    assert second.previous["run_id"] == first.result.run_id and not second.bad_levels
    assert second.history_path == runs_dir / "bench-service" / "bench.jsonl"
    assert [r["run_id"] for r in second.history] == [first.result.run_id]


def test_a_gate_with_no_earlier_run_is_an_error_not_a_pass(tmp_path, runs_dir, monkeypatch):
    benched, _ = _benchmark(tmp_path, monkeypatch, {1: "ok"}, service.BenchRequest(concurrency=(1,), gate=5.0))
    with pytest.raises(BundleError) as err:
        service.gate(benched.history, benched.result, benched.run_dir, percent=5.0, against=None)
    assert err.value.exit_code == EXIT_FAILED and "nothing to gate against" in err.value.message
    assert not (benched.run_dir / "gate.json").exists()


@pytest.mark.parametrize("request_, says", [
    (service.BenchRequest(input_len=0), "--input-len must be at least 1"),
    (service.BenchRequest(gate=5.0, soak="1m"), "gates a benchmark, not a soak"),
])
def test_a_bad_request_is_refused_before_anything_is_sent(tmp_path, runs_dir, monkeypatch, request_, says):
    sent = []

    class Untouched:  # any use of the stack is recorded: a refused request sends nothing
        def __getattr__(self, name):
            sent.append(name)
            raise AssertionError(f"the stack was asked for {name}")

    run = service.soak if request_.soak else service.benchmark
    with pytest.raises(BundleError) as err:
        run(load_config(None), registry.get("tp4"), _record(tmp_path), Untouched(), request_, RecordingReporter())
    assert err.value.exit_code == EXIT_USAGE and says in err.value.message and not sent


H100 = "NVIDIA H100 80GB HBM3"


def _on_a_gpu_host(monkeypatch, profiled):
    """Levels scored as on an H100 (the engine rehearsal's tiny Llama: a floor of microseconds, so the gap
    is the whole TPOT), and SGLang's profiler standing in as `profiled` (what profile_level returns)."""
    from bundle.verify import cost_model, limits, server_profile, verdict
    from tests.test_cost_model import TINY_LLAMA

    scoring = limits.Limits(cost_model.model_shape(TINY_LLAMA), cost_model.gpu(H100), tp=1, servers=1,
                            draft_tokens=0, evidence=verdict.Evidence())
    monkeypatch.setattr(service, "limits_of", lambda *args: scoring)
    monkeypatch.setattr(server_profile, "profile_level", profiled)


def test_a_profiled_level_is_set_against_its_floor_and_its_verdict_is_led_by_what_the_profile_measured(
        tmp_path, runs_dir, monkeypatch):
    """`--profile 1` on a GPU host, the profiler's table a real H100 trace (tests/data/profile/): the level
    judged again with it (its idle gaps, 4.8 ms a step, lead; the suspects a profile measures give way) and
    recorded so; the level not profiled keeps the profile-free order."""
    _on_a_gpu_host(monkeypatch, _profiled_on_h100)
    benched, _ = _benchmark(tmp_path, monkeypatch, {1: "ok", 2: "ok"},
                            service.BenchRequest(concurrency=(1, 2), profile=1))
    recorded = {lv["concurrency"]: lv["limit"]["verdict"]["causes"]
                for lv in runstore.read_jsonl(benched.history_path)[-1]["levels"]}
    profiled, plain = [c["name"] for c in recorded[1]], [c["name"] for c in recorded[2]]
    assert profiled[0] == "profile: idle gaps" and recorded[1][0]["seen"]
    assert {"profile: sampling", "profile: MoE GEMM"} <= set(profiled)
    assert "fallback kernels" not in profiled and "eager mode" not in profiled
    assert plain[0] == "fallback kernels" and not any(name.startswith("profile:") for name in plain)


def test_bench_prints_each_levels_floor_parts_and_the_profiles_families_against_the_floor(
        tmp_path, runs_dir, monkeypatch, capsys):
    """The verb in text mode: under each level its floor's parts; under the profile's table a line per
    family with its share of the floor and the ratio, or why it has none."""
    import argparse
    import types

    from bundle.commands import bench as bench_command
    from bundle.service import finding

    _on_a_gpu_host(monkeypatch, _profiled_on_h100)
    running = types.SimpleNamespace(dep=load_config(None), topology=registry.get("tp4"), launch=_record(tmp_path),
                                    stack=lambda: RunningStack({1: "ok", 2: "ok"}))
    monkeypatch.setattr(finding, "one_running", lambda request, verb: running)
    parser = argparse.ArgumentParser()
    bench_command.add_arguments(parser)
    assert bench_command.run(parser.parse_args(["--concurrency", "1", "2", "--profile", "1"])) == 0
    printed = capsys.readouterr().out.splitlines()
    floors = [line for line in printed if line.startswith("  floor: bound by ")]
    assert len(floors) == 2 and all("weights " in line and ", KV " in line for line in floors)
    assert "  against the floor of C=1, per step (" + floors[0].split(": ", 2)[2] + "):" in printed
    rows = {line.split()[0]: line for line in printed if line.startswith("    ") and " ms a step" in line}
    assert "floor's share" in rows["dense"] and rows["dense"].endswith("x)")
    assert rows["sampling"].endswith("x)") and "not in the floor" in rows["idle"]


def _profiled_on_h100(*args, **kwargs):
    """What profile_level returns for one server whose trace is the real H100 one (tests/data/profile/)."""
    from bundle.verify import profile_trace, server_profile
    from tests.test_profile_trace import H100_TRACE

    table = profile_trace.reduce_file(H100_TRACE)
    return [server_profile.ServerProfile("server", ["CPU", "GPU"], profiles=[table])], {"status": "ok", "reason": ""}


def test_the_measured_levels_are_recorded_when_the_profile_fails(tmp_path, runs_dir, monkeypatch):
    def refused(*args, **kwargs):
        raise BundleError("the profiler went away")

    _on_a_gpu_host(monkeypatch, refused)
    with pytest.raises(BundleError):
        _benchmark(tmp_path, monkeypatch, {1: "ok"}, service.BenchRequest(concurrency=(1,), profile=1))
    history = runstore.read_jsonl(runs_dir / "bench-service" / "bench.jsonl")
    assert [lv["status"] for lv in history[-1]["levels"]] == ["ok"] and history[-1]["levels"][0]["limit"]
