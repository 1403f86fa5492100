"""What a doctor check returns, and how a broken one shows (the runner is the one check core,
bundle/checks.py, which the image audit shares)."""

from __future__ import annotations

import enum
import traceback
from dataclasses import dataclass, field

from bundle.checks import Check, run_guarded
from bundle.errors import EXIT_FAILED, EXIT_OK

__all__ = ["Check", "CheckResult", "Report", "Status", "fail", "ok", "run_check", "skip", "warn"]


class Status(str, enum.Enum):
    OK = "OK"
    WARN = "WARN"  # works, but slower or riskier than it should be
    FAIL = "FAIL"  # a launch would fail or misbehave: the only status that fails `bundle doctor`
    SKIP = "SKIP"  # could not be checked here; `summary` says why (never a stand-in for OK)


@dataclass
class CheckResult:
    name: str
    status: Status
    summary: str  # one line: what was found
    remediation: str | None = None  # one line: what to do (WARN/FAIL/SKIP)
    details: dict = field(default_factory=dict)  # data for --json
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"name": self.name, "status": self.status.value, "summary": self.summary,
                "remediation": self.remediation, "details": self.details,
                "seconds": round(self.seconds, 3)}


def ok(summary: str, **details) -> CheckResult:
    return CheckResult("", Status.OK, summary, None, details)


def warn(summary: str, remediation: str, **details) -> CheckResult:
    return CheckResult("", Status.WARN, summary, remediation, details)


def fail(summary: str, remediation: str, **details) -> CheckResult:
    return CheckResult("", Status.FAIL, summary, remediation, details)


def skip(summary: str, remediation: str | None = None, **details) -> CheckResult:
    return CheckResult("", Status.SKIP, summary, remediation, details)


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
        return {s.value: sum(1 for r in self.results if r.status is s) for s in Status}

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if any(r.status is Status.FAIL for r in self.results) else EXIT_OK

    def as_dict(self) -> dict:
        return {"ok": self.exit_code == EXIT_OK, "counts": self.counts(),
                "checks": [r.as_dict() for r in self.results]}
