"""What an audit check returns, and how a broken one shows (the runner is the one check core,
bundle/checks.py, which `bundle doctor` shares: a registry of small checks, a fix line per finding)."""

from __future__ import annotations

import enum
import traceback
from dataclasses import dataclass, field

from bundle.checks import Check, run_guarded

__all__ = ["Check", "CheckResult", "Finding", "Level", "run_check"]


class Level(str, enum.Enum):
    OK = "OK"
    INFO = "INFO"  # worth knowing, changes nothing (a module that needs a GPU to import)
    WARN = "WARN"  # works, but is not what the lock says or is slower than it should be
    FAIL = "FAIL"  # the image differs from the lock or cannot serve this config on sm_120


@dataclass
class Finding:
    level: Level
    what: str  # one line naming the thing: the distribution, file, library, command
    fix: str | None = None  # one line: what to do

    def as_dict(self) -> dict:
        return {"level": self.level.value, "what": self.what, "fix": self.fix}


@dataclass
class CheckResult:
    name: str
    title: str
    findings: list[Finding] = field(default_factory=list)
    summary: str = ""
    seconds: float = 0.0

    @property
    def level(self) -> Level:
        order = [Level.OK, Level.INFO, Level.WARN, Level.FAIL]
        return max((f.level for f in self.findings), key=order.index, default=Level.OK)

    def as_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "level": self.level.value, "summary": self.summary,
                "findings": [f.as_dict() for f in self.findings], "seconds": round(self.seconds, 3)}


def run_check(check: Check, ctx) -> CheckResult:
    """Run one check (its run: AuditContext -> (summary, [Finding])); an exception inside it is that
    check's FAIL, with the error as the finding."""
    def broken(exc: Exception) -> tuple[str, list[Finding]]:
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return "the check itself failed", [Finding(Level.FAIL, f"{type(exc).__name__}: {exc} "
                                                                f"(at {tb.filename}:{tb.lineno})",
                                                   "run with --debug and report it")]

    (summary, findings), seconds = run_guarded(lambda: check.run(ctx), broken)
    return CheckResult(check.name, check.title, list(findings), summary, seconds)
