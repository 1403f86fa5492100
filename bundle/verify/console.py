"""The rich console every report is printed on: a terminal's own width, else wide enough that nothing
is cut (a log, a pipe, CI)."""

from __future__ import annotations

# Width for output that is not a terminal (a log, a pipe, CI): rich would otherwise use 80 columns
# and cut numbers short with an ellipsis.
LOG_WIDTH = 220


def report_console(*, stderr: bool = False):
    """A rich console for reports: a terminal's own width, else wide enough that nothing is cut."""
    from rich.console import Console

    probe = Console(stderr=stderr)
    return Console(highlight=False, soft_wrap=True, stderr=stderr,
                   width=None if probe.is_terminal else LOG_WIDTH)
