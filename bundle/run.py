"""The one funnel for outside commands that are not Docker's (Docker goes through python-on-whales and
bundle.stack.engine.docker_errors): cosign, git, kubectl, `bash -n`, nvidia-smi, uv, pip, the NCCL and
NIXL probes, a target wing's cluster client, debootstrap, `docker exec -i` with a script on stdin.

Every such command runs here, under a time limit, and every way it can go wrong is one error type,
bundle.errors.CommandFailed, carrying the command, its exit status and its output:
  - the program is not installed  -> CommandMissing (the host lacks it: exit code 4)
  - it gave no answer in time     -> CommandTimedOut (exit code 5), with what it printed so far
  - it exited non-zero (check)    -> CommandFailed (exit code 1), with the tail of its output
Under `--debug` (BUNDLE_DEBUG=1) each command is shown on stderr before it runs, as python-on-whales
shows its docker commands. A caller that words the failure for its user catches CommandFailed and raises
its own kind `from` it.

tests/test_outside_commands.py holds it: no module of bundle/ uses `subprocess` but this one (and the
standalone probes it names, which run without the package).
"""

from __future__ import annotations

import os
import selectors
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bundle.errors import CommandFailed, CommandMissing, CommandTimedOut

QUIET_S = 30.0  # stream(): a "still running" call after this long without a line


@dataclass(frozen=True)
class Finished:
    """A command that ran to its end (whatever its exit status)."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str  # "" where it was merged into stdout

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def tail(text: str, lines: int = 5, *, sep: str = " / ") -> str:
    """The last `lines` non-blank lines of `text`, joined by `sep` ("(no output)" when there are none)."""
    kept = [line for line in (text or "").strip().splitlines() if line.strip()][-lines:]
    return sep.join(kept) or "(no output)"


def shown(command: Sequence[str]) -> str:
    return shlex.join(str(c) for c in command)


def _show(command: Sequence[str]) -> None:
    if os.environ.get("BUNDLE_DEBUG") == "1":
        print(f"+ {shown(command)}", file=sys.stderr, flush=True)


def run(command: Sequence[str | Path], *, timeout: float, input: str | None = None, cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None, check: bool = True, merge_output: bool = False) -> Finished:
    """Run `command` to its end within `timeout` seconds and return what it printed (text).

    check=True raises CommandFailed on a non-zero exit; check=False returns it for the caller to read.
    merge_output=True gives stderr and stdout as one stream, in order (stdout; stderr is "").
    A missing program raises CommandMissing, a command past its time CommandTimedOut (killed, with the
    output it gave so far)."""
    argv = [str(c) for c in command]
    _show(argv)
    try:
        done = subprocess.run(argv, input=input, cwd=cwd, env=None if env is None else dict(env), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge_output else subprocess.PIPE,
                              timeout=timeout, check=False)
    except FileNotFoundError:
        raise CommandMissing(f"{argv[0]}: not found", command=argv, returncode=None) from None
    except subprocess.TimeoutExpired as exc:
        partial = _text(exc.stdout) + _text(exc.stderr)
        raise CommandTimedOut(f"{shown(argv)} gave no answer within {timeout:.0f} s", command=argv,
                              returncode=None, output=partial) from None
    finished = Finished(argv, done.returncode, done.stdout or "", done.stderr or "")
    if check and not finished.ok:
        raise CommandFailed(f"{shown(argv)} exited {finished.returncode}: {tail(finished.output)}", command=argv,
                            returncode=finished.returncode, output=finished.output)
    return finished


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def stream(command: Sequence[str | Path], on_line: Callable[[str], None], *, env: Mapping[str, str] | None = None,
           on_quiet: Callable[[float], None] | None = None, quiet_s: float = QUIET_S) -> int:
    """A command whose output is its progress (debootstrap, `bundle build --standin` in a child): stdout
    and stderr together, `on_line` for each line as it comes, `on_quiet(elapsed seconds)` after every
    `quiet_s` without one, so minutes of work without a line of their own never read as a hang. Returns
    the exit status. No time limit: the work is a build whose length nobody can bound, and the quiet
    calls show it alive; Ctrl-C ends it. A missing program raises CommandMissing."""
    argv = [str(c) for c in command]
    _show(argv)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, env=None if env is None else dict(env), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
    except FileNotFoundError:
        raise CommandMissing(f"{argv[0]}: not found", command=argv, returncode=None) from None
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    pending = b""
    try:
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
    finally:
        selector.close()
        proc.stdout.close()
    return proc.wait()
