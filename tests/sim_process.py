"""Start worker simulators (and the real router, smg) as local processes on 127.0.0.1, for tests.

Each process gets free ports, its own log file, a bounded wait, and is stopped by its own pid."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "bundle" / "rehearsal" / "simulator" / "simulated_model"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_command(port: int, *extra: str, model: Path = MODEL) -> list[str]:
    """The compose files' worker command line, pointed at 127.0.0.1."""
    return ["python3", "-m", "sglang.launch_server", "--model-path", str(model),
            "--served-model-name", "dsv4", "--host", "127.0.0.1", "--port", str(port),
            "--tp-size", "4", "--kv-cache-dtype", "auto", "--moe-runner-backend", "auto", *extra]


def wait_http(url: str, *, status: int = 200, timeout: float = 60.0, proc=None) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process exited with {proc.returncode} before {url} answered")
        try:
            last = requests.get(url, timeout=2).status_code
            if last == status:
                return
        except requests.RequestException as exc:
            last = type(exc).__name__
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer {status} within {timeout}s (last: {last})")


@contextmanager
def process(cmd: list[str], log: Path, env: dict[str, str] | None = None):
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env, cwd=REPO)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


@contextmanager
def simulator(tmp_path: Path, *extra: str, env: dict[str, str] | None = None, name: str = "sim",
              wait_healthy: bool = True, sglang_parser: bool = False):
    """A simulator on a free port; yields (base_url, proc, log_path). The fallback argument parser
    unless asked: SGLang's imports torch (seconds per process); its own tests use it."""
    port = free_port()
    log = tmp_path / f"{name}.log"
    cmd = [sys.executable, "-m", "bundle.rehearsal.simulator", *launch_command(port, *extra)]
    knobs = {"SIM_LOAD_SECONDS": "0", "SIM_ARG_PARSER": "sglang" if sglang_parser else "fallback",
             **(env or {})}
    with process(cmd, log, knobs) as proc:
        base = f"http://127.0.0.1:{port}"
        if wait_healthy:
            wait_http(base + "/health", proc=proc)
        else:
            wait_http(base + "/v1/models", proc=proc)
        yield base, proc, log
