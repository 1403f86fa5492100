"""SGLang and sglang-router log lines that mark how far a start has got, for launch's progress."""

from __future__ import annotations

import re

# In the order a server passes them; the last one seen is where the server is.
SERVER_MILESTONES = [
    ("loading weights", re.compile(r"Load weight begin")),
    ("weights loaded", re.compile(r"Load weight end")),
    ("capturing CUDA graphs", re.compile(r"Capture (cuda|CUDA) graph begin")),
    ("CUDA graphs captured", re.compile(r"Capture (cuda|CUDA) graph end")),
    ("warming up", re.compile(r"(Start of|Begin) (prefill )?warm ?up|warmup", re.IGNORECASE)),
    ("serving", re.compile(r"The server is fired up and ready to roll")),
]
ROUTER_MILESTONES = [
    ("waiting for workers", re.compile(r"[Ww]aiting for (worker|\d+ worker)|Starting router|starting router")),
    ("serving", re.compile(r"(Router|router) (is )?(ready|started|listening)|Starting server on|listening on")),
]
# Lines that explain a failed start better than "exited".
FATAL_PATTERNS = re.compile(
    r"(Traceback \(most recent call last\)|CUDA out of memory|RuntimeError|Error:|error:|"
    r"Address already in use|Connection refused|No such file or directory)"
)


def latest(log_text: str, milestones) -> str | None:
    """The furthest milestone present in the log, or None."""
    reached = None
    for name, pattern in milestones:
        if pattern.search(log_text):
            reached = name
    return reached


def last_fatal_line(log_text: str) -> str | None:
    lines = [line for line in log_text.splitlines() if FATAL_PATTERNS.search(line)]
    return lines[-1].strip()[:300] if lines else None
