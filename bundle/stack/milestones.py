"""SGLang and router (smg) log lines that mark how far a start has got, for launch's progress."""

from __future__ import annotations

import re

# In the order a server passes them; the last one seen is where the server is.
SERVER_MILESTONES = [
    ("loading weights", re.compile(r"Load weight begin")),
    ("weights loaded", re.compile(r"Load weight end")),
    ("capturing CUDA graphs", re.compile(r"Capture (cuda|CUDA) graph begin")),
    ("CUDA graphs captured", re.compile(r"Capture (cuda|CUDA) graph end")),
    # SGLang 0.5.23's own warm-up lines (entrypoints/http_server.py, warmup.py). Not a bare "warmup": the
    # server-arguments dump printed at start holds `skip_server_warmup=False`, and matching it put every
    # start at "warming up" before its weights loaded (seen on the CPU engine, with no GPU).
    ("warming up", re.compile(r"(Start of|Begin) (pd disaggregation |prefill )?warm ?up|Running warmup")),
    ("serving", re.compile(r"The server is fired up and ready to roll")),
]
# smg 1.13.0 logs "Starting router on ..." and then "Router ready | workers: []" and "Starting server
# on ..." before any worker is registered: "serving" means its port answers, /readiness says more.
ROUTER_MILESTONES = [
    ("waiting for workers", re.compile(r"[Ww]aiting for (worker|\d+ worker)|Starting router|starting router")),
    ("serving", re.compile(r"(Router|router) (is )?(ready|started|listening)|Starting server on|listening on")),
]
# Lines that explain a failed start better than "exited".
FATAL_PATTERNS = re.compile(
    r"(Traceback \(most recent call last\)|CUDA out of memory|RuntimeError|Error:|error:|"
    r"Address already in use|Connection refused|No such file or directory|[Cc]rash(ed|ing)? |"
    r"hit an exception|Killed)"
)


# Terminal colours and cursor moves (the router logs in colour): never part of a headline.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def reached(line: str, milestones) -> int:
    """The index of the furthest milestone this one line shows, or -1."""
    found = -1
    for index, (_name, pattern) in enumerate(milestones):
        if pattern.search(line):
            found = index
    return found


def is_fatal(line: str) -> bool:
    return bool(FATAL_PATTERNS.search(clean(line)))


def clean(line: str) -> str:
    """The line without escape codes and surrounding space, cut to a headline's length."""
    return _ANSI.sub("", line).strip()[:300]
