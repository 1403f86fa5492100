"""Where a service prints: the Reporter a verb hands its services, so that nothing below bundle/commands/
prints on its own, and the rich console every report is printed on (a terminal's own width, else wide
enough that nothing is cut: a log, a pipe, CI). On the ground floor, so any floor may take a Reporter
without importing upward."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

# Width for output that is not a terminal (a log, a pipe, CI): rich would otherwise use 80 columns
# and cut numbers short with an ellipsis.
LOG_WIDTH = 220


class Reporter(Protocol):
    """Where a service's progress goes. The verb passes report_console() in; a test passes its own
    (a recording one). It is the part of rich's Console the services use, so a Console is a Reporter
    as it is and the text printed stays the Console's, byte for byte."""

    @property
    def is_terminal(self) -> bool: ...  # a live status line only on a terminal; a log gets lines

    def print(self, *objects: Any, **options: Any) -> None: ...  # rich markup unless markup=False

    def status(self, status: str, **options: Any) -> AbstractContextManager: ...  # the live line


def plain(reporter: Reporter) -> Callable[[str], None]:
    """The `report=` callable the lower layers take (one line of plain text: brackets in a log or an
    image tag are not markup)."""
    return lambda line: reporter.print(line, markup=False)


def report_console(*, stderr: bool = False):
    """A rich console for reports: a terminal's own width, else wide enough that nothing is cut."""
    from rich.console import Console

    probe = Console(stderr=stderr)
    return Console(highlight=False, soft_wrap=True, stderr=stderr,
                   width=None if probe.is_terminal else LOG_WIDTH)
