"""Reading text that other programs wrote: container logs, a child's output, a batch job's files.

Three rules, for every reader of outside text in the driver:
- a line ends at "\\n" only (`str.splitlines()` also splits at "\\r", "\\x0b", "\\x0c", "\\x1c"-"\\x1e",
  "\\x85" and "\\u2028", so a progress bar's rewrites would become lines of their own);
- a line rewritten with "\\r" (tqdm's bars: SGLang's "Multi-thread loading shards", CUDA-graph capture)
  counts as its last state;
- a `docker logs --timestamps` stamp is taken only when it parses as one: a line without one (a piece
  of a bar flushed by Docker's log copier, a wrapped line) never stands in for a timestamp.

Nothing here raises on malformed text: what it cannot read it skips, and says so under --debug.
"""

from __future__ import annotations

import codecs
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

# Docker prints RFC 3339 with nanoseconds (`2026-12-05T10:11:12.123456789Z`); other writers may give
# fewer digits or an offset. Anything else at the start of a line is text, not a stamp.
_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})")


def _debug(message: str) -> None:
    if os.environ.get("BUNDLE_DEBUG") == "1":
        print(f"[debug] {message}", file=sys.stderr, flush=True)


def last_state(line: str) -> str:
    """What a terminal would show for one line that may rewrite itself with "\\r": its last
    non-empty state (a bar ending in "\\r" still shows what it wrote before)."""
    if "\r" not in line:
        return line
    states = [part for part in line.split("\r") if part]
    return states[-1] if states else ""


def prefixed_last_state(line: str, separator: str = " | ") -> str:
    """`last_state` for a line that a multiplexer prefixed (`docker compose logs`' "decode-1  | "):
    the prefix is kept, the rest shown at its last state."""
    head, sep, body = line.partition(separator)
    if sep and "\r" not in head:
        return head + sep + last_state(body)
    return last_state(line)


def lines(text: str, state: Callable[[str], str] = last_state) -> list[str]:
    """The lines of `text`, split at "\\n" only, each at its last state (`state`); a final line
    without its newline is a line too."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return [state(part) for part in parts]


class LineSplitter:
    """Lines from a stream of chunks, whatever their boundaries: a chunk may end inside a line or
    inside a UTF-8 character. `feed` returns the lines a chunk completes; `flush` the rest."""

    def __init__(self, state: Callable[[str], str] = last_state) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._state = state

    def feed(self, chunk: bytes | str) -> list[str]:
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        if "\n" not in text:
            self._pending += text
            return []
        head, _, rest = (self._pending + text).rpartition("\n")
        self._pending = rest
        return [self._state(part) for part in head.split("\n")]

    def flush(self) -> list[str]:
        text, self._pending = self._pending + self._decoder.decode(b"", final=True), ""
        return [self._state(text)] if text else []


@dataclass(frozen=True, order=True)
class Stamp:
    """One parsed log timestamp. Ordered by the instant (nanoseconds kept), so stamps written with
    different precision still compare right."""

    instant: datetime  # whole seconds and microseconds, in UTC
    nanos: int  # the nanoseconds past `instant`'s microsecond
    text: str  # as written

    def as_datetime(self) -> datetime:
        """To the microsecond (what `docker logs --since` takes), in UTC."""
        return self.instant


def parse_stamp(word: str) -> Stamp | None:
    """The stamp `word` writes, or None when it is not one."""
    match = _STAMP.fullmatch(word)
    if match is None:
        return None
    day, clock, fraction, zone = match.groups()
    digits = (fraction or "").ljust(9, "0")
    try:
        whole = datetime.fromisoformat(f"{day}T{clock}{'+00:00' if zone == 'Z' else zone}")
    except ValueError:  # a month 13, a second 61: shaped like a stamp, not one
        return None
    instant = whole.astimezone(timezone.utc).replace(microsecond=int(digits[:6]))
    return Stamp(instant=instant, nanos=int(digits[6:]), text=word)


@dataclass(frozen=True)
class LogLine:
    """One line of `docker logs --timestamps` output."""

    stamp: Stamp | None  # None: the line did not start with one (it is read as text all the same)
    text: str  # at its last state, without the stamp
    complete: bool  # False for a last line still without its newline (a bar mid-way, a flushed piece)


def stamped_lines(text: str) -> list[LogLine]:
    """Each line of `docker logs --timestamps` output. The stamp is read from the line as Docker wrote
    it, before its "\\r" rewrites are collapsed (a bar longer than Docker's 16 KB buffer comes as
    several stamped pieces on one line: the first stamp is the line's)."""
    out: list[LogLine] = []
    raw_lines = text.split("\n")
    last_complete = raw_lines[-1] == ""
    if last_complete:
        raw_lines.pop()
    skipped = 0
    for number, raw in enumerate(raw_lines, 1):
        complete = last_complete or number < len(raw_lines)
        word, space, rest = raw.partition(" ")
        stamp = parse_stamp(word)
        if stamp is None:
            skipped += 1
            out.append(LogLine(None, last_state(raw), complete))
        else:
            out.append(LogLine(stamp, last_state(rest) if space else "", complete))
    if skipped:
        _debug(f"{skipped} log line(s) without a timestamp read as text (a progress bar's pieces?)")
    return out
