"""The doctor's runner: a broken check is a FAIL, not a crash; only FAIL fails the run."""

from __future__ import annotations

import json

from bundle.doctor import core, registry
from bundle.doctor.context import HostContext
from bundle.doctor.core import Check, Report
from bundle.doctor.report import render_json
from bundle.errors import EXIT_FAILED, EXIT_OK
from bundle.findings import Level


def boom(ctx):
    raise RuntimeError("disk exploded")


def test_an_exception_inside_a_check_becomes_its_fail_and_the_next_check_still_runs(monkeypatch):
    checks = (Check("boom", "Boom", boom), Check("fine", "Fine", lambda ctx: core.ok("all good")))
    monkeypatch.setattr(registry, "CHECKS", checks)
    report = registry.run_checks(HostContext())
    assert [r.name for r in report.results] == ["boom", "fine"]
    broken, fine = report.results
    assert broken.status is Level.FAIL and "RuntimeError: disk exploded" in broken.summary
    assert "disk exploded" in broken.details["traceback"]
    assert fine.status is Level.OK
    assert report.exit_code == EXIT_FAILED


def test_a_check_returning_the_wrong_type_is_a_fail():
    result = core.run_check(Check("odd", "Odd", lambda ctx: "OK"), HostContext())
    assert result.status is Level.FAIL and "returned str" in result.summary


def test_warn_and_skip_do_not_fail_the_run():
    report = Report([core.warn("slow", "fix it"), core.skip("no GPU here"), core.ok("fine")])
    assert report.exit_code == EXIT_OK
    assert report.counts() == {"OK": 1, "WARN": 1, "FAIL": 0, "SKIP": 1}


def test_json_report_carries_status_summary_and_remediation():
    result = core.fail("port 30000 is taken", "stop it")
    result.name = "ports"
    data = json.loads(render_json(Report([result])))
    assert data["ok"] is False and data["counts"]["FAIL"] == 1
    assert data["checks"][0] == {"name": "ports", "status": "FAIL", "summary": "port 30000 is taken",
                                 "remediation": "stop it", "details": {}, "seconds": 0.0}


def test_only_and_skip_select_checks(monkeypatch):
    checks = tuple(Check(n, n, lambda ctx: core.ok("x")) for n in ("a", "b", "c"))
    monkeypatch.setattr(registry, "CHECKS", checks)
    assert [r.name for r in registry.run_checks(HostContext(), only=["b"]).results] == ["b"]
    assert [r.name for r in registry.run_checks(HostContext(), skip=["b"]).results] == ["a", "c"]


def test_a_required_check_that_skips_fails_the_run_with_its_own_finding_and_fix(monkeypatch):
    # `make launch` requires driver and gpus: on a host without NVIDIA GPUs the doctor stops it there.
    checks = (Check("gpus", "GPUs", lambda ctx: core.skip("no GPU here: nvidia-smi is not on PATH", "run it on the GPU host")),
              Check("disk", "Disk", lambda ctx: core.skip("not checked")))
    monkeypatch.setattr(registry, "CHECKS", checks)
    assert registry.run_checks(HostContext()).exit_code == EXIT_OK
    report = registry.run_checks(HostContext(), required=["gpus"])
    gpus, disk = report.results
    assert gpus.status is Level.FAIL and "nvidia-smi" in gpus.summary and gpus.remediation == "run it on the GPU host"
    assert disk.status is Level.SKIP
    assert report.exit_code == EXIT_FAILED
