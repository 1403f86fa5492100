"""A host command whose output is its progress (debootstrap, `bundle build --standin` in a child):
each line passed on as it comes, and a "still running" call after QUIET_S of silence, so minutes
of work without a line of their own never read as a hang."""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from collections.abc import Callable

QUIET_S = 30.0


def stream(cmd: list[str], on_line: Callable[[str], None], *, env: dict[str, str] | None = None,
           on_quiet: Callable[[float], None] | None = None, quiet_s: float = QUIET_S) -> int:
    """Run `cmd` (stdout and stderr together), `on_line` for each line, `on_quiet(elapsed seconds)`
    after every `quiet_s` without one; the exit code."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    pending = b""
    while True:
        if not selector.select(timeout=quiet_s):
            if on_quiet is not None:
                on_quiet(time.monotonic() - started)
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            on_line(line.decode(errors="replace").rstrip())
    if pending:
        on_line(pending.decode(errors="replace").rstrip())
    selector.close()
    proc.stdout.close()
    return proc.wait()
