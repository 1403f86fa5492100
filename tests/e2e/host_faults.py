"""Faults injected from the host the way they happen to a real server: its process killed with
SIGKILL (what the kernel's OOM killer or a segfaulting CUDA kernel leaves Docker to see), never a
cooperative exit the server was asked for. A container's main process is the server itself
(bundle-entrypoint execs it), so its host PID, `docker inspect`'s State.Pid, is the server's."""

from __future__ import annotations

import os
import signal
import subprocess


def host_pid(project: str, service: str) -> int:
    """The host PID of the main process of `service`'s running container in compose `project`."""
    ids = subprocess.run(["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project={project}",
                          "--filter", f"label=com.docker.compose.service={service}"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert len(ids) == 1, f"expected one running container of {service} in {project}, found {ids}"
    pid = int(subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", ids[0]], capture_output=True,
                             text=True, check=True).stdout)
    assert pid > 0, f"{service} of {project} has no running process"
    return pid


def sigkill(project: str, service: str) -> int:
    """SIGKILL `service`'s server process from the host (Docker sees exit 137, as after an OOM kill);
    returns the PID killed."""
    pid = host_pid(project, service)
    os.kill(pid, signal.SIGKILL)
    return pid


def interruptible() -> None:
    """`preexec_fn` for a driver process a test will interrupt: SIGINT back to its default in the
    child, so Python installs its KeyboardInterrupt handler. A test run started as a background job of
    a non-interactive shell has SIGINT ignored (POSIX), every child inherits that, and Python keeps an
    ignored SIGINT ignored: the Ctrl-C a user gives a foreground `bundle` would never arrive (seen on
    2026-12-04, a cold run started with `(... &)`: both SIGINT tests failed, the driver ran on)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
