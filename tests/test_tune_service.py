"""`bundle tune`'s service (bundle/tune/service.py) called directly, with a recording reporter: the
plan is refused before anything starts, the sweep ranks what ran and writes the winner, and a signal
mid-sweep comes back as Tuned.interrupted with no winner written. The candidates' launch, smoke and
bench are replaced by measured lines (the end-to-end test runs them for real)."""

from __future__ import annotations

import json

import pytest

from bundle.errors import EXIT_USAGE, BundleError
from bundle.rehearsal import registry as modes
from bundle.tune import results, runner, service
from tests.conftest import write_config
from tests.recording import RecordingReporter

# output tok/s of each candidate's one level, as its bench would measure it
SPEEDS = {"defaults": 100.0, "speculative=mtp": 180.0, "speculative=mtp-light": 140.0}


@pytest.fixture
def no_engine(monkeypatch):
    """No Docker: the engine is there, nothing of the project runs, the rehearsal image exists."""
    from bundle.rehearsal.shared import image as rehearsal_image

    monkeypatch.setattr(service.engine, "require_engine", lambda: None)
    monkeypatch.setattr(service.engine, "require_compose", lambda: None)
    monkeypatch.setattr(service.docker, "project_containers", lambda project: [])
    monkeypatch.setattr(rehearsal_image, "ensure_image", lambda report, **_: report("image: up to date") or "tag")


def _request(tmp_path, **extra) -> service.TuneRequest:
    config = write_config(tmp_path, "project: p\n")
    space = write_config(tmp_path, "levers:\n  speculative: [mtp, mtp-light]\n", name="space.yaml")
    return service.TuneRequest(**{"topology": "tp4", "config": str(config), "space": str(space),
                                  "mode": modes.get("sim"), **extra})


def _measured(interrupt_at: str | None = None):
    def run_candidate(item, plan, sweep, reporter):
        name = item.candidate.name
        if name == interrupt_at:
            raise KeyboardInterrupt
        line = {"key": item.candidate.key, "name": name, "overrides": item.candidate.overrides,
                "changes": list(item.candidate.changes), "status": "ok", "phase": "done",
                "seconds": {"total": 1.0},
                "levels": [{"concurrency": 1, "status": "ok",
                            "metrics": {"output_throughput": SPEEDS[name], "mean_tpot_ms": 10.0}}]}
        results.append(plan.project, line)
        return line
    return run_candidate


def test_the_sweep_ranks_every_candidate_and_writes_the_fastest_as_the_tuned_config(
        tmp_path, runs_dir, no_engine, monkeypatch):
    monkeypatch.setattr(runner, "run_candidate", _measured())
    reporter = RecordingReporter()
    planned = service.plan_sweep(_request(tmp_path, output=str(tmp_path / "won.yaml")))
    tuned = service.sweep(planned, reporter)
    assert [r["name"] for r in tuned.ranked] == ["speculative=mtp", "speculative=mtp-light", "defaults"]
    assert tuned.winner["name"] == "speculative=mtp" and tuned.reference["name"] == "defaults"
    assert tuned.interrupted is None and tuned.tuned_path == tmp_path / "won.yaml"
    assert "speculative: mtp" in tuned.tuned_path.read_text()
    sweep = json.loads((tuned.sweep_dir / "sweep.json").read_text())
    assert sweep["winner"] == "speculative=mtp" and sweep["interrupted"] is False
    # the rehearsal image's progress and each candidate's header went to the reporter, nowhere else
    assert reporter.lines[0] == "image: up to date"
    assert sum("candidate " in line for line in reporter.lines) == 3


def test_a_signal_mid_sweep_comes_back_as_interrupted_with_no_winner_written(
        tmp_path, runs_dir, no_engine, monkeypatch):
    monkeypatch.setattr(runner, "run_candidate", _measured(interrupt_at="speculative=mtp-light"))
    tuned = service.sweep(service.plan_sweep(_request(tmp_path)), RecordingReporter())
    assert isinstance(tuned.interrupted, KeyboardInterrupt)
    assert tuned.tuned_path is None and not (tmp_path / "bundle.tuned.yaml").exists()
    left = {r["name"]: (r["status"], r.get("reason")) for r in tuned.ranked}
    assert left["speculative=mtp-light"] == ("not run", "interrupted")
    assert left["speculative=mtp"][0] == "ok"  # finished before the signal: kept for the resume


def test_a_rehearsal_mode_whose_speed_ranks_nothing_is_refused_before_anything_starts(tmp_path, runs_dir):
    untunable = next(m for m in modes.MODES.values() if not m.tunable)
    with pytest.raises(BundleError) as err:
        service.plan_sweep(_request(tmp_path, mode=untunable))
    assert err.value.exit_code == EXIT_USAGE and "worker simulator only" in err.value.message
