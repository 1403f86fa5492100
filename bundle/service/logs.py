"""LogsRequest -> the launched project's logs (one service's or all), as lines: each ends at "\\n" only
and a progress bar shows its last state (bundle/log_lines.py), so a bar that rewrote itself 700 times is
one line, not 70 KB of carriage returns. Followed, the lines come in batches as the engine sends them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bundle import log_lines
from bundle.errors import UsageError
from bundle.service.running import Launched


@dataclass(frozen=True)
class LogsRequest:
    target: Launched
    service: str | None = None  # one of the topology's services; None: all
    tail: int | None = None  # the last N lines of each (None: all)
    follow: bool = False


def logs(request: LogsRequest) -> Iterator[list[str]]:
    """Batches of lines: one for a finished read; followed, one per chunk the engine sends, then what
    was left unterminated. A service the topology does not have is a usage error, before anything is
    read."""
    target = request.target
    names = [s.name for s in target.topology.services]
    if request.service and request.service not in names:
        raise UsageError(f"{target.topology.name} has no service {request.service!r}; its services: "
                         f"{', '.join(names)}")
    output = target.stack.logs(request.service, tail=request.tail, follow=request.follow, timestamps=False)
    return _batches(output)


def _batches(output) -> Iterator[list[str]]:
    if isinstance(output, str):
        yield log_lines.lines(output, log_lines.prefixed_last_state)
        return
    splitters: dict[str, log_lines.LineSplitter] = {}
    for source, chunk in output:  # python-on-whales streams (stdout|stderr, bytes)
        splitter = splitters.setdefault(source, log_lines.LineSplitter(log_lines.prefixed_last_state))
        yield list(splitter.feed(chunk))
    yield [rest for splitter in splitters.values() for rest in splitter.flush()]
