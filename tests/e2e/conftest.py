"""The Docker tier's shared rehearsals: one `bundle launch <topology> --rehearsal` per topology for all
the checks that only read a running stack (attestation, smoke, bench, the API key, the rehearsal's
answers); under xdist they are one work unit, and the stacks come down when it ends. Each launch costs
a minute or more on CI's 2 cores; the checks that break or take down a stack launch their own.

A shared stack is configured as a careful operator would run it: an API key (so the key checks have
something to enforce), its own project and front port. A check that turns a simulator knob (wrong
answers, timings) does it through `sim_knobs`, which puts the knobs back afterwards, so the next check
finds the stack as launched."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from bundle import topology as registry
from bundle.cli import main
from bundle.config.loader import load_config
from bundle.errors import BundleError
from bundle.stack import runstate
from bundle.targets.registry import stack_of
from tests.conftest import one_build_at_a_time
from tests.rehearsal_stack import SERVED

SHARED_KEY = "shared-rehearsal-key-" + "k9z" * 6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SharedRehearsal:
    topology: str
    config: Path
    dep: object  # bundle.config.model.Deployment
    key: str
    front_port: int

    @property
    def project(self) -> str:
        return self.dep.project_name(self.topology)

    launched: runstate.LaunchRecord | None = None  # read once the launch succeeded

    @property
    def record(self) -> runstate.LaunchRecord:
        assert self.launched is not None, f"the shared {self.topology} launch failed"
        return self.launched

    @property
    def front(self) -> str:
        return f"http://127.0.0.1:{self.front_port}"

    @property
    def workers(self) -> list[str]:
        return [s.name for s in registry.get(self.topology).servers]


@pytest.fixture(scope="session")
def rehearsal_image(tmp_path_factory) -> str:
    """The simulator rehearsal image, built once when its inputs changed (minutes), else instant; the
    first test that asks for it gets the build's time (tests/conftest.py, BUILD_TIMEOUTS_S)."""
    from bundle.rehearsal.shared import image as rehearsal_image
    from bundle.stack import engine

    tag = rehearsal_image.image_tag()
    if engine.image_exists(tag):  # built by `make test`: no wait for the chain's lock, which a build may hold
        return tag
    with one_build_at_a_time(tmp_path_factory, "standin-chain"):  # the chain's lock: it builds the chain's lower layers
        return rehearsal_image.ensure_image()


@pytest.fixture(scope="session")
def _shared_runs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("shared-runs")


class SharedStacks:
    """The session's shared rehearsals, launched on first use; `down()` takes every one down (the
    next `get` of a topology launches it again)."""

    def __init__(self, folder: Path):
        self.made: dict[str, SharedRehearsal] = {}
        self.folder = folder
        self.key_file = folder / "api_key"
        self.key_file.write_text(SHARED_KEY + "\n")

    def get(self, topology: str) -> SharedRehearsal:
        if topology not in self.made:
            port = _free_port()
            config = self.folder / f"{topology}.yaml"
            config.write_text(f"project: shared-{uuid.uuid4().hex[:6]}\napi_key_file: {self.key_file}\n"
                              f"model:\n  served_name: {SERVED}\nnetwork:\n  front_port: {port}\n")
            shared = SharedRehearsal(topology, config, load_config(config), SHARED_KEY, port)
            self.made[topology] = shared
            assert main(["launch", topology, "--rehearsal", "sim", "-c", str(config)]) == 0, f"shared {topology} launch"
            # Kept here: at the session's end no test's BUNDLE_RUNS_DIR points at the record any more.
            shared.launched = runstate.load(shared.project)
        return self.made[topology]

    __call__ = get

    def down(self) -> None:
        while self.made:
            _, shared = self.made.popitem()
            try:
                if shared.launched is None:
                    raise BundleError("no launch record")
                stack_of(shared.launched).down(volumes=True, timeout=10)  # down -v --remove-orphans
            except BundleError as exc:  # whatever a failed launch left behind
                print(f"teardown of {shared.project}: {exc}")
                subprocess.run(["docker", "compose", "-p", shared.project, "down", "-v", "--remove-orphans", "-t",
                                "2"], capture_output=True)


_LIVE: list[SharedStacks] = []  # this process's, while its session fixture lives


@pytest.fixture(scope="session")
def _shared_stacks(tmp_path_factory, _shared_runs, rehearsal_image):
    stacks = SharedStacks(tmp_path_factory.mktemp("shared-rehearsal"))
    _LIVE.append(stacks)
    yield stacks
    _LIVE.remove(stacks)
    stacks.down()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """The shared stacks come down as soon as the tests reading them are done, not at the session's end:
    on CI's 2 cores the other modules of the tier would share the CPU with their idle health checks
    for the rest of it. Their tests form one work unit under xdist (tests/conftest.py's UNITS), so on
    a worker the next test after the unit's last one needs none of them. Without xdist the tests run in
    file order, the unit's modules apart: there the stacks stay up to the session's end, as before."""
    def reads(test) -> bool:
        return test is not None and "shared_rehearsal" in getattr(test, "fixturenames", ())

    if os.environ.get("PYTEST_XDIST_WORKER") and reads(item) and not reads(nextitem):
        for stacks in _LIVE:
            stacks.down()


@pytest.fixture
def shared_rehearsal(_shared_stacks, _shared_runs, monkeypatch):
    """`shared_rehearsal("tp4")`: the session's running rehearsal of that topology (launched on first
    use). The test's BUNDLE_RUNS_DIR is the shared stacks' own, so the verbs find their launch records."""
    monkeypatch.setenv("BUNDLE_RUNS_DIR", str(_shared_runs))
    return _shared_stacks


def _knobs_call(stack, service: str, key: str | None, knobs: dict | None = None) -> dict:
    """GET (or POST `knobs` to) a simulator's /sim/faults from inside its container; with an API key
    the simulator guards it as SGLang guards its admin endpoints."""
    cmd = ["curl", "-fsS"] + (["-H", f"Authorization: Bearer {key}"] if key else [])
    if knobs is not None:
        cmd += ["-X", "POST", "-H", "Content-Type: application/json", "-d", json.dumps(knobs)]
    return json.loads(stack.exec(service, cmd + ["http://127.0.0.1:30000/sim/faults"]))


@contextmanager
def sim_knobs(shared: SharedRehearsal, **knobs):
    """Set the simulators' run-time knobs (POST /sim/faults) in every worker of `shared`; afterwards
    every knob changed is put back to what it was."""
    stack = stack_of(shared.record)
    before = {s: _knobs_call(stack, s, shared.key) for s in shared.workers}
    for service in shared.workers:
        _knobs_call(stack, service, shared.key, knobs)
    try:
        yield
    finally:
        for service in shared.workers:
            _knobs_call(stack, service, shared.key, {k: before[service][k] for k in knobs})
