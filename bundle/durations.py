"""Compose-style durations ("90s", "30m", "1h30m") as seconds."""

from __future__ import annotations

import re

from bundle.errors import UsageError

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def parse_duration(text: str, *, what: str = "duration") -> float:
    text = str(text).strip()
    if text.replace(".", "", 1).isdigit():
        return float(text)  # a bare number means seconds
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise UsageError(f"{what}: {text!r} is not a duration", hint="write e.g. 90s, 30m or 1h30m")
    return sum(float(n) * _UNIT[u] for n, u in parts)
