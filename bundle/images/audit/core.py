"""What an audit check returns, and how a broken one shows (the runner is the one check core,
bundle/checks.py, which `bundle doctor` shares: a registry of small checks, a fix line per finding;
the findings are the shared ones of bundle/findings.py)."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

from bundle.checks import Check, run_guarded
from bundle.findings import Finding, Level, worst

__all__ = ["Check", "CheckResult", "finding_dict", "run_check"]


def finding_dict(finding: Finding) -> dict:
    """A finding as the audit's JSON (and `bundle verify`'s) has always written it."""
    return {"level": finding.level.value, "what": finding.what, "fix": finding.fix}


@dataclass
class CheckResult:
    name: str
    title: str
    findings: list[Finding] = field(default_factory=list)
    summary: str = ""
    seconds: float = 0.0

    @property
    def level(self) -> Level:
        return worst(self.findings)

    def as_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "level": self.level.value, "summary": self.summary,
                "findings": [finding_dict(f) for f in self.findings], "seconds": round(self.seconds, 3)}


def run_check(check: Check, ctx) -> CheckResult:
    """Run one check (its run: AuditContext -> (summary, [Finding])); an exception inside it is that
    check's FAIL, with the error as the finding."""
    def broken(exc: Exception) -> tuple[str, list[Finding]]:
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return "the check itself failed", [Finding(Level.FAIL, f"{type(exc).__name__}: {exc} "
                                                                f"(at {tb.filename}:{tb.lineno})",
                                                   fix="run with --debug and report it")]

    (summary, findings), seconds = run_guarded(lambda: check.run(ctx), broken)
    return CheckResult(check.name, check.title, list(findings), summary, seconds)
