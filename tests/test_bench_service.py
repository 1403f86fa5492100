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
