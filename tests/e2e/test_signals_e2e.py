"""SIGINT and SIGTERM reaching the driver alone during a launch (Ctrl-C, a CI timeout, systemd,
`timeout`): it stops the `docker compose up` it runs, removes what it started, and exits 130 / 143."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from bundle.stack import docker
from tests.conftest import write_config
from tests.e2e.host_faults import interruptible
from tests.sim_process import free_port

# Each test launches its own rehearsal (it breaks or takes down its stack): the image first.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("rehearsal_image"),
              pytest.mark.timeout(300)]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_launch_cleans_up_and_leaves_nothing_running(tmp_path, runs_dir, sig, code):
    name = f"sig-{uuid.uuid4().hex[:6]}"
    config = write_config(tmp_path, f"project: {name}\nnetwork:\n  front_port: {free_port()}\n")
    try:
        # Slow "weights" keep the launch waiting; the signal goes to the driver's process only.
        proc = subprocess.Popen([sys.executable, "-m", "bundle", "launch", "pd", "--rehearsal", "sim", "-c", str(config),
                                 "--sim", "SIM_LOAD_SECONDS=300"], env=dict(os.environ), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=interruptible)
        deadline = time.monotonic() + 600  # the first launch may build the rehearsal image
        while len(docker.project_containers(f"{name}-pd")) < 2:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "the launch never started its containers"
            time.sleep(0.5)
        time.sleep(2)  # compose up is now waiting on the workers' health
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == code, out
        assert "stopping what this launch started" in out
        assert docker.project_containers(f"{name}-pd") == [], "containers left running after the signal"
    finally:
        subprocess.run(["docker", "compose", "-p", f"{name}-pd", "down", "-v", "--remove-orphans", "-t", "2"],
                       capture_output=True)
