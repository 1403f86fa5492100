"""What an audit check returns, and the runner that keeps one broken check from stopping the rest
(the shape of bundle/doctor/core.py: a registry of small checks, a fix line per finding)."""

from __future__ import annotations

import enum
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field


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


@dataclass(frozen=True)
class Check:
    name: str  # short, stable: --only/--skip and the JSON
    title: str  # what the table shows
    run: Callable  # (AuditContext) -> (summary, [Finding])


def run_check(check: Check, ctx) -> CheckResult:
    """Run one check; an exception inside it is that check's FAIL, with the error as the finding."""
    started = time.monotonic()
    try:
        summary, findings = check.run(ctx)
    except Exception as exc:  # noqa: BLE001 - a broken check is a FAIL, never a crash
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        summary = "the check itself failed"
        findings = [Finding(Level.FAIL, f"{type(exc).__name__}: {exc} (at {tb.filename}:{tb.lineno})",
                            "run with --debug and report it")]
    return CheckResult(check.name, check.title, list(findings), summary, time.monotonic() - started)
