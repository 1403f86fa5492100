"""What a doctor check returns, and how a broken one shows (the runner is the one check core,
bundle/checks.py, which the image audit shares; the finding is the shared one, bundle/findings.py)."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

from bundle.checks import Check, run_guarded
from bundle.errors import EXIT_FAILED, EXIT_OK
from bundle.findings import Finding, Level

__all__ = ["Check", "CheckResult", "Report", "STATUSES", "fail", "ok", "run_check", "skip", "warn"]

# The levels a doctor check gives, in the order its counts show them (INFO is the audit's, never the
# doctor's: a host fact is either fine, risky, broken or not checked). Only FAIL fails `bundle doctor`;
# SKIP means not checked here (the summary says why), never a stand-in for OK.
STATUSES: tuple[Level, ...] = (Level.OK, Level.WARN, Level.FAIL, Level.SKIP)


@dataclass
class CheckResult:
    name: str
    finding: Finding  # the one finding of the check: status, summary, remediation
    details: dict = field(default_factory=dict)  # data for --json
    seconds: float = 0.0

    # The doctor's own words for the finding's parts, as its table and JSON have always named them.
    @property
    def status(self) -> Level:
        return self.finding.level

    @property
    def summary(self) -> str:  # one line: what was found
        return self.finding.what

    @property
    def remediation(self) -> str | None:  # one line: what to do (WARN/FAIL/SKIP)
        return self.finding.fix

    def as_dict(self) -> dict:
        return {"name": self.name, "status": self.status.value, "summary": self.summary,
                "remediation": self.remediation, "details": self.details,
                "seconds": round(self.seconds, 3)}


def ok(summary: str, **details) -> CheckResult:
    return CheckResult("", Finding(Level.OK, summary), details)


def warn(summary: str, remediation: str, **details) -> CheckResult:
    return CheckResult("", Finding(Level.WARN, summary, fix=remediation), details)


def fail(summary: str, remediation: str, **details) -> CheckResult:
    return CheckResult("", Finding(Level.FAIL, summary, fix=remediation), details)


def skip(summary: str, remediation: str | None = None, **details) -> CheckResult:
    return CheckResult("", Finding(Level.SKIP, summary, fix=remediation), details)


def run_check(check: Check, ctx) -> CheckResult:
    """Run one check (its run: HostContext -> CheckResult); an exception inside it is that check's
    FAIL, with the error as its summary."""
    def run() -> CheckResult:
        result = check.run(ctx)
        if not isinstance(result, CheckResult):
            raise TypeError(f"check {check.name} returned {type(result).__name__}, not CheckResult")
        return result

    def broken(exc: Exception) -> CheckResult:
        return fail(f"the check itself failed: {type(exc).__name__}: {exc}",
                    "run `bundle doctor --debug` for the traceback and report it",
                    traceback=traceback.format_exc(limit=6))

    result, seconds = run_guarded(run, broken)
    result.name = check.name
    result.seconds = seconds
    return result


@dataclass
class Report:
    results: list[CheckResult]

    def counts(self) -> dict[str, int]:
        return {s.value: sum(1 for r in self.results if r.status is s) for s in STATUSES}

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if any(r.status is Level.FAIL for r in self.results) else EXIT_OK

    def as_dict(self) -> dict:
        return {"ok": self.exit_code == EXIT_OK, "counts": self.counts(),
                "checks": [r.as_dict() for r in self.results]}
