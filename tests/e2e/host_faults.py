"""Faults injected from the host the way they happen to a real server: its process killed with
SIGKILL (what the kernel's OOM killer or a segfaulting CUDA kernel leaves Docker to see), never a
cooperative exit the server was asked for; or frozen (`docker pause`), a hang with its sockets left
open. A container's main process is the server itself
(bundle-entrypoint execs it), so its host PID, `docker inspect`'s State.Pid, is the server's."""

from __future__ import annotations

import os
import signal
import subprocess
import time


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


def freeze(container: str, attempts: int = 20) -> None:
    """`docker pause` `container` (cgroup freezer: every process stopped, its sockets left open: a hang,
    not an exit). The v1 freezer gives up when a process will not stop at once, which happens to one in
    uninterruptible I/O on fuse-overlayfs; stop 43's CI run lost a test so (`docker pause` exit 1
    with decode running and scraped up a second before). A refusal is retried, 0.5 s apart;
    the last refusal's own words fail the test."""
    for _ in range(attempts):
        done = subprocess.run(["docker", "pause", container], capture_output=True, text=True)
        if done.returncode == 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"docker pause {container} refused {attempts} times: {done.stderr.strip()}")


def thaw(container: str) -> None:
    """`docker unpause`, quietly: called in a `finally`, where the container may already be gone."""
    subprocess.run(["docker", "unpause", container], capture_output=True)


def interruptible() -> None:
    """`preexec_fn` for a driver process a test will interrupt: SIGINT back to its default in the
    child, so Python installs its KeyboardInterrupt handler. A test run started as a background job of
    a non-interactive shell has SIGINT ignored (POSIX), every child inherits that, and Python keeps an
    ignored SIGINT ignored: the Ctrl-C a user gives a foreground `bundle` would never arrive (seen on
    2026-12-04, a cold run started with `(... &)`: both SIGINT tests failed, the driver ran on)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
