"""The one vocabulary of what a check found, for every report that judges something: `bundle doctor`,
the image audit, `bundle verify`, attestation after launch and the config's rules. A finding is a level,
one line saying what was found, an optional detail and an optional fix line; each report groups
findings its own way (a check, a container, a server) and keeps its own words at its edge (the rules'
"error"/"warning", attestation's "N/A"), so users see the reports they always saw."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Level(enum.StrEnum):
    # A str enum: a level compares equal to its name, formats as it and is written as it in JSON, as
    # the reports' readers (and the `runs/` records written before this type) expect.
    OK = "OK"
    INFO = "INFO"  # worth knowing, changes nothing (a module that needs a GPU to import)
    SKIP = "SKIP"  # not checked here (no GPU, not applicable): said, never a stand-in for OK
    WARN = "WARN"  # works, but slower or riskier than it should be, or not what the lock says
    FAIL = "FAIL"  # cannot work as asked: the only level that fails a report


# Worst last. SKIP ranks above INFO because something was left unchecked, below WARN because nothing
# was found wrong.
SEVERITY: tuple[Level, ...] = (Level.OK, Level.INFO, Level.SKIP, Level.WARN, Level.FAIL)


@dataclass(frozen=True)
class Finding:
    level: Level
    what: str  # one line: the thing judged (a distribution, a file, a setting) and, mostly, the verdict on it
    detail: str = ""  # the verdict, where `what` only names the thing (attestation: "CUDA graphs")
    fix: str | None = None  # one line: what to do


def worst(findings: Iterable[Finding]) -> Level:
    """The most severe level among the findings; OK when there are none."""
    return max((f.level for f in findings), key=SEVERITY.index, default=Level.OK)


def failed(findings: Iterable[Finding]) -> bool:
    return any(f.level is Level.FAIL for f in findings)
