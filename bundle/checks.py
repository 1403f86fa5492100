"""The one check core of `bundle doctor` (bundle/doctor/) and the image audit (bundle/images/audit/): a
check is a name, a title and a function; a registry is a tuple of them in table order; `selected`
gives --only/--skip one meaning for both; `run_guarded` times a check and turns an exception inside it
into that check's failure, never a crash (each caller says how its report shows the failure: the
doctor's FAIL with a traceback, the audit's FAIL finding naming the line)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

R = TypeVar("R")


@dataclass(frozen=True)
class Check:
    name: str  # short, stable: --only/--skip and the JSON report
    title: str  # what the table shows
    run: Callable  # (the caller's context) -> the caller's result


def selected(checks: Iterable[Check], only: list[str] | None = None, skip: list[str] | None = None) -> list[Check]:
    """The checks to run, in registry order: those in `only` (all when empty), less those in `skip`."""
    return [c for c in checks if not ((only and c.name not in only) or (skip and c.name in skip))]


def run_guarded(run: Callable[[], R], broken: Callable[[Exception], R]) -> tuple[R, float]:
    """run()'s result and its seconds; an exception inside it is broken(exc)'s result instead
    (called while the exception is handled, so the traceback is still at hand)."""
    started = time.monotonic()
    try:
        result = run()
    except Exception as exc:  # noqa: BLE001 - the point: a broken check must not stop the others
        result = broken(exc)
    return result, time.monotonic() - started
