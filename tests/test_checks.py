"""One check core (bundle/checks.py) under `bundle doctor` and the image audit: the same selection,
and a check that raises is its own FAIL in either report, never a crash of the others."""

from __future__ import annotations

from bundle.checks import Check, selected
from bundle.doctor import core as doctor_core
from bundle.findings import Finding, Level
from bundle.images.audit import core as audit_core


def _raises(ctx):
    raise RuntimeError("disk on fire")


def test_only_and_skip_mean_the_same_for_both():
    checks = [Check(n, n.upper(), None) for n in ("a", "b", "c")]
    assert [c.name for c in selected(checks)] == ["a", "b", "c"]
    assert [c.name for c in selected(checks, only=["c", "a"])] == ["a", "c"]  # registry order
    assert [c.name for c in selected(checks, only=["a", "b"], skip=["b"])] == ["a"]


def test_a_broken_audit_check_is_a_fail_naming_where_it_broke():
    result = audit_core.run_check(Check("x", "X", _raises), ctx=None)
    assert result.level is Level.FAIL and result.summary == "the check itself failed"
    (finding,) = result.findings
    assert "RuntimeError: disk on fire" in finding.what and "test_checks.py:" in finding.what
    fine = audit_core.run_check(Check("y", "Y", lambda ctx: ("fine", [Finding(Level.INFO, "note")])), ctx=None)
    assert fine.level is Level.INFO and fine.summary == "fine" and fine.seconds >= 0


def test_a_broken_doctor_check_is_a_fail_with_its_traceback():
    result = doctor_core.run_check(Check("x", "X", _raises), ctx=None)
    assert result.status is Level.FAIL and result.name == "x"
    assert "disk on fire" in result.summary and "RuntimeError" in result.details["traceback"]
