"""A Reporter (bundle/reporter.py) that keeps what a service printed, for tests that call a
service directly: each print() as one string (markup left as written), each status() text."""

from __future__ import annotations

from contextlib import nullcontext


class RecordingReporter:
    is_terminal = False  # as in a log: progress comes as lines, no live status

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.statuses: list[str] = []

    def print(self, *objects, **options) -> None:
        self.lines.append(" ".join(str(o) for o in objects))

    def status(self, status: str, **options):
        self.statuses.append(status)
        return nullcontext(self)

    def update(self, status: str) -> None:  # what a status() context's own update() does
        self.statuses.append(status)

    def text(self) -> str:
        return "\n".join(self.lines)
