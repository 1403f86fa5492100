"""After a reboot, on a real Docker engine restart: a pd rehearsal (worker simulators, the real smg
router) launched into a Docker engine of the test's own (tests/e2e/own_engine.py: its own dockerd,
network namespace, socket and data root; the bundle reaches it through DOCKER_HOST), that engine stopped
with SIGTERM as a reboot's shutdown stops it, and started again on the same data root.

The chosen behaviour (compose/pd.yaml, restart: unless-stopped on every service): every service comes
back by itself and the front door serves again; `bundle status` says so; `bundle launch` of the same
project reconciles (nothing recreated) and serves; the run records of before the reboot survive.
Beside it, a project on the other policy, on-failure:3: Docker's restore brings back exactly the
containers whose last exit code was not 0, which depends on whether each exited 0 on the SIGTERM
within its stop timeout or was killed (137). Its outcome varies from run to run (seen here: nothing came
back; the servers came back because the shutdown had killed them past their 10 s stop timeout), so the test holds Docker to that rule and `bundle status` to
the truth: which services run, which do not, whether it serves, and the command that brings it back.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from bundle.rehearsal.shared import image as rehearsal_image
from tests.conftest import write_config
from tests.e2e.own_engine import OwnEngine, own_engine, small_rehearsal_image
from tests.sim_process import free_port

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]
BUDGET_S = 720  # every command of the test's own engine ends by then: 3 minutes left to clean up
SERVICES = {"prefill", "decode", "router"}
SERVING_WAIT_S = 120  # the router pairs the workers again once their health checks pass


TIMES: dict[str, float] = {}  # seconds per step, printed at the end


def _ok(engine: OwnEngine, *args: str) -> str:
    done = engine.run_bundle(*args)
    assert done.returncode == 0, f"bundle {' '.join(args)} exited {done.returncode}:\n{done.stdout[-4000:]}"
    return done.stdout


def _status(engine: OwnEngine, config) -> dict:
    return json.loads(_ok(engine, "status", "pd", "-c", str(config), "--json"))


def _until_ready(engine: OwnEngine, port: int) -> float:
    """Seconds until the front door's readiness path answers 200 (curl in the engine's namespace, where
    the port is published), at most SERVING_WAIT_S."""
    began = time.monotonic()
    while time.monotonic() - began < SERVING_WAIT_S:
        if subprocess.run([*engine.in_netns(), "curl", "-fsS", "-m", "2", f"http://127.0.0.1:{port}/readiness"],
                          capture_output=True).returncode == 0:
            break
        time.sleep(1)
    return time.monotonic() - began


def both(work, names) -> dict:
    """work(name) for each name at once (two launches share the wait for health checks); name -> result."""
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return dict(zip(names, pool.map(work, names)))


def _ids(engine: OwnEngine, project: str) -> list[str]:
    return sorted(engine.docker("ps", "-q", "--filter", f"label=com.docker.compose.project={project}").stdout.split())


def _machine_engine_projects() -> str:
    """The compose projects on the machine's own engine (read only): the bundle must never put one there."""
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    return subprocess.run(["docker", "ps", "-a", "--format", '{{.Label "com.docker.compose.project"}}'],
                          env=env, capture_output=True, text=True, check=True).stdout


def test_an_engine_restart_brings_the_whole_stack_back_and_status_says_what_runs(tmp_path, runs_dir):
    started = time.monotonic()
    stem = f"reboot-{uuid.uuid4().hex[:6]}"
    with own_engine(tmp_path / "dockerd.log", budget_s=BUDGET_S) as engine:
        TIMES.update(small_rehearsal_image(engine, rehearsal_image.image_tag()))

        # Two pd projects: the default policy, and a config that asks for on-failure:3.
        configs, projects, ports = {}, {}, {}
        for name, extra in (("back", ""), ("none", "lifecycle:\n  restart: on-failure:3\n")):
            ports[name] = free_port()
            configs[name] = write_config(tmp_path, f"project: {stem}-{name}\nnetwork:\n  front_port: {ports[name]}\n"
                                                   + extra, name=f"{name}.yaml")
            projects[name] = f"{stem}-{name}-pd"
        began = time.monotonic()
        both(lambda name: _ok(engine, "launch", "pd", "--rehearsal", "sim", "-c", str(configs[name])), configs)
        TIMES["two launches"] = time.monotonic() - began
        _ok(engine, "smoke", "pd", "-c", str(configs["back"]))
        records_before = {p.relative_to(runs_dir) for p in runs_dir.rglob("*")}
        assert stem not in _machine_engine_projects()  # DOCKER_HOST honoured end to end

        # The reboot: SIGTERM to dockerd (it stops every container first), then the same data root again.
        stopped_in = engine.stop()
        killed = engine.killed_on_stop()
        began = time.monotonic()
        engine.start()
        TIMES["engine start"] = time.monotonic() - began

        # The chosen policy: every service came back by itself, and the front door serves again.
        back = engine.containers(projects["back"])
        assert {s for s, c in back.items() if c["state"] == "running"} == SERVICES, back
        assert {c["restart_policy"] for c in back.values()} == {"unless-stopped"}, back
        TIMES["ready again"] = _until_ready(engine, ports["back"])
        status = _status(engine, configs["back"])
        assert status["front_door"]["serving"], status
        assert status["standing"]["command"] is None and "every service runs" in status["standing"]["words"]

        # The other policy: back is exactly what the shutdown killed (exit 137), not what exited 0 itself.
        none = engine.containers(projects["none"])
        assert {c["restart_policy"] for c in none.values()} == {"on-failure"}, none
        came_back = {s for s, c in none.items() if c["state"] == "running"}
        assert came_back == {s for s, c in none.items() if c["id"] in killed}, (none, killed)
        assert all(c["exit_code"] == 0 for s, c in none.items() if s not in came_back), none
        print(f"on-failure:3 after the restart: back {sorted(came_back) or 'none'}, killed on stop "
              f"{sorted(s for s, c in {**back, **none}.items() if c['id'] in killed) or 'none'}")
        standing = _status(engine, configs["none"])["standing"]
        assert set(standing["running"]) == came_back
        assert {n.split()[0] for n in standing["not_running"]} == SERVICES - came_back
        words = " ".join(_ok(engine, "status", "pd", "-c", str(configs["none"])).split())
        command = f"bundle launch pd -c {configs['none']} --rehearsal sim"
        if not came_back:
            assert "none of its services runs" in words and "the front door does not serve" in words, words
        elif came_back != SERVICES:
            assert f"running: {', '.join(sorted(came_back))}; not running:" in words, words
        if standing["command"] is not None:  # not whole, or not serving yet
            assert f"bring it back: {command}" in words, words

        # That command brings it back; the chosen policy's relaunch keeps what runs (nothing recreated).
        running = _ids(engine, projects["back"])
        began = time.monotonic()
        relaunched = both(lambda name: _ok(engine, *command.split()[1:]) if name == "none" else
                          _ok(engine, "launch", "pd", "--rehearsal", "sim", "-c", str(configs[name])), configs)
        TIMES["two relaunches"] = time.monotonic() - began
        assert "reconciling pd" in relaunched["none"]  # the same project, brought back
        assert _status(engine, configs["none"])["front_door"]["serving"]
        assert _ids(engine, projects["back"]) == running
        _ok(engine, "smoke", "pd", "-c", str(configs["back"]))

        # The run records of before the reboot are all still there.
        assert records_before <= {p.relative_to(runs_dir) for p in runs_dir.rglob("*")}
    print(f"dockerd stopped in {stopped_in:.1f} s; "
          + "; ".join(f"{k} {v:.0f} s" for k, v in TIMES.items()) + f"; whole test {time.monotonic() - started:.0f} s")
